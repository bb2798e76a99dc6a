/* opt.c — table-driven option parsing and --help (opt.h). */
#include "opt.h"

#include <assert.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* "a|b|c" as "a, b or c". */
static void choice_list(const char *choices, char *out, size_t n)
{
    size_t k = 0, bars = 0;
    for (const char *c = choices; *c; c++)
        bars += *c == '|';
    out[0] = '\0';
    for (const char *c = choices; *c && k + 8 < n; c++) {
        if (*c != '|') {
            out[k++] = *c;
            continue;
        }
        const char *sep = --bars ? ", " : " or ";
        for (; *sep; sep++)
            out[k++] = *sep;
    }
    out[k] = '\0';
}

static int choice_index(const char *choices, const char *arg)
{
    size_t len = strlen(arg);
    int i = 0;
    for (const char *c = choices; c; i++) {
        const char *bar = strchr(c, '|');
        size_t cl = bar ? (size_t)(bar - c) : strlen(c);
        if (cl == len && !strncmp(c, arg, len))
            return i;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

static int bad_number(const cli_opt *o, const char *arg, errbuf *e)
{
    if (o->want)
        return err_set(e, MS_ERR_USAGE, "--%s wants %s, not '%s'", o->name, o->want, arg);
    if (o->hi > 0 && o->kind != CLI_U32 && o->kind != CLI_INT)
        return err_set(e, MS_ERR_USAGE, "--%s wants %g..%g, not '%s'", o->name, o->lo, o->hi, arg);
    if (o->hi > 0)
        return err_set(e, MS_ERR_USAGE, "--%s wants an integer in %g..%g, not '%s'", o->name, o->lo,
                       o->hi, arg);
    return err_set(e, MS_ERR_USAGE, "--%s wants an integer >= %g, not '%s'", o->name, o->lo, arg);
}

static int store(const cli_opt *o, const char *arg, errbuf *e)
{
    unsigned long long u;
    long long i;
    double d;
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dest = 1; return MS_OK;
    case CLI_STR: *(const char **)o->dest = arg; return MS_OK;
    case CLI_U32:
        if (parse_u64(arg, &u) || (double)u < o->lo || (double)u > (o->hi > 0 ? o->hi : UINT32_MAX))
            return bad_number(o, arg, e);
        *(uint32_t *)o->dest = (uint32_t)u;
        return MS_OK;
    case CLI_INT:
        if (parse_i64(arg, &i) || (double)i < o->lo || (double)i > (o->hi > 0 ? o->hi : INT32_MAX))
            return bad_number(o, arg, e);
        *(int *)o->dest = (int)i;
        return MS_OK;
    case CLI_U64:
        if (parse_u64(arg, &u) || (double)u < o->lo || (o->hi > 0 && (double)u > o->hi))
            return bad_number(o, arg, e);
        *(unsigned long long *)o->dest = u;
        return MS_OK;
    case CLI_F64:
        if (parse_double(arg, &d) || !(d >= o->lo) || (o->hi > o->lo && d > o->hi))
            return bad_number(o, arg, e);
        *(double *)o->dest = d;
        return MS_OK;
    case CLI_CHOICE: {
        int k = choice_index(o->choices, arg);
        if (k < 0) {
            char list[256];
            choice_list(o->choices, list, sizeof list);
            return err_set(e, MS_ERR_USAGE, "--%s is %s, not '%s'", o->name, list, arg);
        }
        *(int *)o->dest = k;
        return MS_OK;
    }
    case CLI_LIST: {
        cli_list *l = o->dest;
        if (l->n >= l->max)
            return err_set(e, MS_ERR_USAGE, "at most %d --%s options", l->max, o->name);
        l->v[l->n++] = arg;
        return MS_OK;
    }
    case CLI_FN: return o->fn(o, arg, e);
    case CLI_HELP: return CLI_HELP_ASKED;
    }
    return err_set(e, MS_ERR_INTERNAL, "--%s: unknown option kind", o->name);
}

/* "unknown option '--outptu' (did you mean '--output'? see mpcsim run --help)": the hint is the
 * nearest long name, for a long option only (a short one is one letter: any is as near). */
static int unknown_option(const cli_cmd *c, const char *given, errbuf *e)
{
    const char *dym = NULL;
    if (!strncmp(given, "--", 2) && given[2]) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(given + 2, "="), given + 2);
        const char *names[128];
        size_t n = 0;
        for (size_t i = 0; i < c->n_opts && n < 128; i++)
            names[n++] = c->opts[i].name;
        dym = did_you_mean(name, names, n);
    }
    if (dym)
        return err_set(e, MS_ERR_USAGE,
                       "unknown option '%s' (did you mean '--%s'? see mpcsim %s --help)", given,
                       dym, c->name);
    return err_set(e, MS_ERR_USAGE, "unknown option '%s' (see mpcsim %s --help)", given, c->name);
}

int cli_parse(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos, errbuf *e)
{
    struct option *lo = calloc(c->n_opts + 1, sizeof *lo);
    char *so = malloc(2 + 2 * c->n_opts + 1);
    if (!lo || !so) {
        free(lo), free(so);
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    so[k++] = ':'; /* a missing value is ':', an unknown option '?' */
    for (size_t i = 0; i < c->n_opts; i++) {
        const cli_opt *o = &c->opts[i];
        int has_arg = o->kind != CLI_FLAG && o->kind != CLI_HELP;
        lo[i] =
            (struct option){o->name, has_arg ? required_argument : no_argument, NULL, 256 + (int)i};
        if (o->short_name) {
            so[k++] = o->short_name;
            if (has_arg)
                so[k++] = ':';
        }
    }
    so[k] = '\0';
    optind = 1;
    opterr = 0;
    int rc = MS_OK, ch;
    while (rc == MS_OK && (ch = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        const cli_opt *o = NULL;
        if (ch >= 256)
            o = &c->opts[ch - 256];
        for (size_t i = 0; !o && ch != ':' && ch != '?' && i < c->n_opts; i++)
            if (c->opts[i].short_name == ch)
                o = &c->opts[i];
        if (ch == ':')
            rc = err_set(e, MS_ERR_USAGE, "option '%s' needs a value", argv[optind - 1]);
        else if (!o)
            rc = unknown_option(c, argv[optind - 1], e);
        else {
            rc = store(o, optarg, e);
            if (o->seen && rc == MS_OK)
                *o->seen = 1;
        }
    }
    free(lo), free(so);
    if (rc)
        return rc;
    int np = 0;
    for (int i = optind; i < argc; i++) {
        if (np >= c->max_pos)
            return err_set(e, MS_ERR_USAGE, "unexpected argument '%s'", argv[i]);
        pos[np++] = argv[i];
    }
    if (n_pos)
        *n_pos = np;
    return MS_OK;
}

int cli_parse_cmd(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos,
                  void (*usage)(FILE *f, const cli_cmd *c))
{
    errbuf e;
    int rc = cli_parse(c, argc, argv, pos, n_pos, &e);
    if (rc == CLI_HELP_ASKED) {
        usage(stdout, c);
        return CLI_HELP_ASKED;
    }
    if (rc) {
        cli_error(c->name, "%s", e.msg);
        return 2;
    }
    return 0;
}

int cli_want_one(const cli_cmd *c, int n_pos, const char *none, const char *many,
                 void (*usage)(FILE *f, const cli_cmd *c))
{
    if (n_pos == 1)
        return 0;
    cli_error(c->name, "%s", n_pos == 0 ? none : many);
    usage(stderr, c);
    return 2;
}

int cli_parse_one(const cli_cmd *c, int argc, char **argv, const char **arg, const char *none,
                  const char *many, void (*usage)(FILE *f, const cli_cmd *c))
{
    const char *pos[2]; /* the one, and a second to tell apart from it */
    assert(c->max_pos <= 2);
    int n_pos = 0, rc = cli_parse_cmd(c, argc, argv, pos, &n_pos, usage);
    if (!rc && !(rc = cli_want_one(c, n_pos, none, many, usage)))
        *arg = pos[0];
    return rc;
}

/* Terminal columns of the n bytes at s (UTF-8: continuation bytes take none). */
static int text_cols(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++)
        w += ((unsigned char)s[i] & 0xC0) != 0x80;
    return w;
}

/* An option's help text from column at, its lines continued at column col. Kept as written
 * (each '\n' a new line) where every line fits HELP_COLS; otherwise filled again word by
 * word to HELP_COLS, the text's own breaks taken as spaces. */
#define HELP_COLS 80
static void put_help_text(FILE *f, const char *h, int col, int at)
{
    int fits = 1, x = at;
    for (const char *p = h;; p++) {
        if (*p == '\n' || !*p) {
            fits &= x <= HELP_COLS;
            x = col;
            if (!*p)
                break;
        } else {
            x += ((unsigned char)*p & 0xC0) != 0x80;
        }
    }
    if (fits) {
        for (const char *p = h; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fprintf(f, "%*s", col, "");
        }
        fputc('\n', f);
        return;
    }
    x = at;
    int first = 1;
    for (const char *p = h; *p;) {
        while (*p == ' ' || *p == '\n')
            p++;
        size_t n = strcspn(p, " \n");
        if (!n)
            break;
        int w = text_cols(p, n);
        if (!first && x + 1 + w > HELP_COLS) {
            fprintf(f, "\n%*s", col, "");
            x = col;
        } else if (!first) {
            fputc(' ', f);
            x++;
        }
        fwrite(p, 1, n, f);
        x += w;
        first = 0;
        p += n;
    }
    fputc('\n', f);
}

void cli_help(const cli_cmd *c, FILE *f)
{
    int width = c->col - 6; /* "  -x, " */
    for (size_t i = 0; i < c->n_opts; i++) {
        const cli_opt *o = &c->opts[i];
        char left[96];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        int len = (int)strlen(left);
        if (o->short_name)
            fprintf(f, "  -%c, %s", o->short_name, left);
        else
            fprintf(f, "      %s", left);
        fprintf(f, "%*s", len < width ? width - len : 2, "");
        put_help_text(f, o->help, c->col, 6 + (len < width ? width : len + 2));
    }
}

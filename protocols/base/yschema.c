/* yschema.c — field-schema tables over yamlx trees: messages, single-value readers, whole
 * mappings, and the key table printed from the same schema. */
#include "yschema.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- messages ---------------------------------------------------------------------------- */

static int vfail(const ys_ctx *x, const yx_node *at, const char *hint, const char *fmt, va_list ap)
{
    char what[700];
    vsnprintf(what, sizeof what, fmt, ap);
    int code = x->code ? x->code : MS_ERR_INPUT;
    if (!x->path)
        return err_set(x->e, code, "%s%s%s", what, hint ? "\n  hint: " : "", hint ? hint : "");
    return err_set(x->e, code, "%s:%d:%d: error: %s%s%s", x->path, at ? at->line : 1,
                   at ? at->col : 1, what, hint ? "\n  hint: " : "", hint ? hint : "");
}

int ys_fail(const ys_ctx *x, const yx_node *at, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(x, at, hint, fmt, ap);
    va_end(ap);
    return rc;
}

int ys_fail_wrap(const ys_ctx *x, const yx_node *at, const char *hint, const char *what,
                 const char *msg)
{
    /* "inner.yaml:3:9: error: …" keeps its place in the other file: "what inner.yaml:3:9: …" */
    const char *m = strstr(msg, "error: ");
    size_t loc = m ? (size_t)(m - msg) : 0;
    m = m ? m + 7 : msg;
    if (loc < 2 || loc > 600 || msg[loc - 2] != ':' || msg[loc - 1] != ' ')
        loc = 0;
    return ys_fail(x, at, strstr(m, "hint: ") ? NULL : hint, "%s%.*s%s", what, (int)loc, msg, m);
}

int ys_unknown_name(const ys_ctx *x, const yx_node *at, const char *what, const char *name,
                    const char *const *cands, size_t n, const char *hint)
{
    const char *dm = did_you_mean(name, cands, n);
    if (dm)
        return ys_fail(x, at, hint, "unknown %s '%s' (did you mean '%s'?)", what, name, dm);
    return ys_fail(x, at, hint, "unknown %s '%s'", what, name);
}

int ys_unknown_key(const ys_ctx *x, const yx_node *key, const char *where, const char *const *keys,
                   size_t n)
{
    const char *dm = did_you_mean(key->str, keys, n);
    char hint[512];
    size_t o = (size_t)snprintf(hint, sizeof hint, "keys of '%s':", where);
    for (size_t i = 0; i < n && o < sizeof hint; i++)
        o += (size_t)snprintf(hint + o, sizeof hint - o, " %s", keys[i]);
    if (dm)
        return ys_fail(x, key, hint, "unknown key '%s' in '%s' (did you mean '%s'?)", key->str,
                       where, dm);
    return ys_fail(x, key, hint, "unknown key '%s' in '%s'", key->str, where);
}

/* ---- single values ----------------------------------------------------------------------- */

int ys_need_scalar(const ys_ctx *x, const yx_node *v, const char *key, const char *type)
{
    if (v->kind != YX_SCALAR)
        return ys_fail(x, v, "give a single value (a list here would be one more sweep axis)",
                       "'%s' must be %s, not %s", key, type, yx_kind_name(v));
    if (yx_is_null(v))
        return ys_fail(x, v, "give a value or remove the key", "'%s' has no value (expected %s)",
                       key, type);
    return MS_OK;
}

int ys_need_map(const ys_ctx *x, const yx_node *v, const char *key, const char *example)
{
    if (v->kind != YX_MAP)
        return ys_fail(x, v, example, "'%s' must be a mapping, not %s", key, yx_kind_name(v));
    return MS_OK;
}

static int out_of_range(const ys_ctx *x, const yx_node *v, const char *key, const char *range)
{
    return ys_fail(x, v, range, "'%s' = %s is out of range", key, v->str);
}

int ys_u64(const ys_ctx *x, const yx_node *v, const char *key, uint64_t lo, uint64_t hi,
           uint64_t *out)
{
    int rc = ys_need_scalar(x, v, key, "an integer");
    if (rc)
        return rc;
    long long s;
    unsigned long long u;
    double d;
    char range[128];
    snprintf(range, sizeof range, "'%s' must be between %llu and %llu", key, (unsigned long long)lo,
             (unsigned long long)hi);
    if (!parse_u64(v->str, &u)) {
        if (u < lo || u > hi)
            return out_of_range(x, v, key, range);
        *out = u;
        return MS_OK;
    }
    if (!parse_i64(v->str, &s)) /* negative */
        return out_of_range(x, v, key, range);
    /* negative, or a whole number beyond 64 bits (2^64, 1e300): out of range, not a type error */
    if (!parse_double(v->str, &d) &&
        (d < 0 || (d == floor(d) && (d < (double)lo || d > (double)hi))))
        return out_of_range(x, v, key, range);
    return ys_fail(x, v, "write a whole number, e.g. 128", "'%s' must be an integer, not '%s'", key,
                   v->str);
}

int ys_u32(const ys_ctx *x, const yx_node *v, const char *key, uint32_t lo, uint32_t hi,
           uint32_t *out)
{
    uint64_t u;
    int rc = ys_u64(x, v, key, lo, hi, &u);
    if (!rc)
        *out = (uint32_t)u;
    return rc;
}

int ys_i64(const ys_ctx *x, const yx_node *v, const char *key, long long lo, long long hi,
           long long *out)
{
    int rc = ys_need_scalar(x, v, key, "an integer");
    if (rc)
        return rc;
    long long s;
    char range[128];
    snprintf(range, sizeof range, "'%s' must be between %lld and %lld", key, lo, hi);
    if (!parse_i64(v->str, &s)) {
        if (s < lo || s > hi)
            return out_of_range(x, v, key, range);
        *out = s;
        return MS_OK;
    }
    unsigned long long u;
    double d;
    if (!parse_u64(v->str, &u)) /* beyond long long */
        return out_of_range(x, v, key, range);
    if (!parse_double(v->str, &d) && d == floor(d) && (d < (double)lo || d > (double)hi))
        return out_of_range(x, v, key, range); /* a whole number beyond 64 bits */
    return ys_fail(x, v, "write a whole number, e.g. 128", "'%s' must be an integer, not '%s'", key,
                   v->str);
}

int ys_double(const ys_ctx *x, const yx_node *v, const char *key, double lo, double hi, double *out)
{
    int rc = ys_need_scalar(x, v, key, "a number");
    if (rc)
        return rc;
    double d;
    if (parse_double(v->str, &d))
        return ys_fail(x, v, "write a number, e.g. 0.5 or 1e-5", "'%s' must be a number, not '%s'",
                       key, v->str);
    if (d < lo || d > hi) {
        char range[128];
        snprintf(range, sizeof range, "'%s' must be between %g and %g", key, lo, hi);
        return out_of_range(x, v, key, range);
    }
    *out = d;
    return MS_OK;
}

int ys_bool_text(const char *s)
{
    static const char *const t[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
    static const char *const f[] = {"false", "False", "FALSE", "no", "No", "off", "Off"};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (!strcmp(s, t[i]))
            return 1;
        if (!strcmp(s, f[i]))
            return 0;
    }
    return -1;
}

int ys_bool(const ys_ctx *x, const yx_node *v, const char *key, int *out)
{
    int rc = ys_need_scalar(x, v, key, "true or false");
    if (rc)
        return rc;
    int b = v->quoted ? -1 : ys_bool_text(v->str);
    if (b < 0 && (!strcmp(v->str, "0") || !strcmp(v->str, "1")))
        b = v->str[0] == '1';
    if (b < 0)
        return ys_fail(x, v, "write true or false", "'%s' must be true or false, not '%s'", key,
                       v->str);
    *out = b;
    return MS_OK;
}

int ys_str(const ys_ctx *x, const yx_node *v, const char *key, char *out, size_t cap)
{
    int rc = ys_need_scalar(x, v, key, "a string");
    if (rc)
        return rc;
    if (strlen(v->str) >= cap)
        return ys_fail(x, v, "shorten the value", "'%s' is longer than %zu characters", key,
                       cap - 1);
    memcpy(out, v->str, strlen(v->str) + 1);
    return MS_OK;
}

int ys_enum(const ys_ctx *x, const yx_node *v, const char *key, const char *const *names, size_t n,
            int *out)
{
    int rc = ys_need_scalar(x, v, key, "a name");
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v->str, names[i])) {
            *out = (int)i;
            return MS_OK;
        }
    char hint[256];
    size_t o = (size_t)snprintf(hint, sizeof hint, "'%s' is one of:", key);
    for (size_t i = 0; i < n && o < sizeof hint; i++)
        o += (size_t)snprintf(hint + o, sizeof hint - o, " %s", names[i]);
    char what[96];
    snprintf(what, sizeof what, "'%s' value", key);
    return ys_unknown_name(x, v, what, v->str, names, n, hint);
}

/* ---- whole mappings ---------------------------------------------------------------------- */

static size_t n_names(const char *const *names)
{
    size_t n = 0;
    while (names && names[n])
        n++;
    return n;
}

const ys_field *ys_find(const ys_schema *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->field[i].key, key))
            return &s->field[i];
    return NULL;
}

int ys_check_keys(const ys_ctx *x, const yx_node *m, const ys_schema *s, const char *const *extra,
                  size_t n_extra)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *k = m->key[i]->str;
        if (ys_find(s, k))
            continue;
        size_t j = 0;
        while (j < n_extra && strcmp(extra[j], k))
            j++;
        if (j < n_extra)
            continue;
        const char *keys[128];
        size_t n = 0;
        for (size_t e = 0; e < n_extra && n < 128; e++)
            keys[n++] = extra[e];
        for (size_t f = 0; f < s->n && n < 128; f++)
            keys[n++] = s->field[f].key;
        return ys_unknown_key(x, m->key[i], s->name, keys, n);
    }
    return MS_OK;
}

/* Numeric bounds of a field: lo = hi = 0 means the type's whole range. */
static int unbounded(const ys_field *f) { return f->lo == 0 && f->hi == 0; }

int ys_read_field(const ys_ctx *x, const yx_node *v, const ys_field *f, void *obj)
{
    char *p = obj ? (char *)obj + f->off : NULL;
    int rc = MS_OK;
    switch (f->type) {
    case YS_U32:
    case YS_U64: {
        uint64_t max = f->type == YS_U32 ? UINT32_MAX : UINT64_MAX, u;
        uint64_t lo = unbounded(f) ? 0 : (uint64_t)f->lo;
        uint64_t hi = unbounded(f) || f->hi >= (double)max ? max : (uint64_t)f->hi;
        if ((rc = ys_u64(x, v, f->key, lo, hi, &u)))
            break;
        if (f->type == YS_U32)
            *(uint32_t *)p = (uint32_t)u;
        else
            *(uint64_t *)p = u;
        break;
    }
    case YS_INT: {
        long long s;
        long long lo = unbounded(f) ? INT_MIN : (long long)f->lo;
        long long hi = unbounded(f) ? INT_MAX : (long long)f->hi;
        if (!(rc = ys_i64(x, v, f->key, lo, hi, &s)))
            *(int *)p = (int)s;
        break;
    }
    case YS_DBL: {
        double d;
        if (!(rc = ys_double(x, v, f->key, unbounded(f) ? -DBL_MAX : f->lo,
                             unbounded(f) ? DBL_MAX : f->hi, &d))) {
            if ((f->flags & YS_WHOLE) && d != floor(d))
                return ys_fail(x, v, "write a whole number, e.g. 128",
                               "'%s' must be a whole number, not '%s'", f->key, v->str);
            *(double *)p = d;
        }
        break;
    }
    case YS_BOOL: rc = ys_bool(x, v, f->key, (int *)p); break;
    case YS_STR: {
        int k; /* a word from names[], when the field has them */
        if (!f->names || !(rc = ys_enum(x, v, f->key, f->names, n_names(f->names), &k)))
            rc = ys_str(x, v, f->key, p, f->size);
        break;
    }
    case YS_ENUM: rc = ys_enum(x, v, f->key, f->names, n_names(f->names), (int *)p); break;
    case YS_FIXED:
        if ((rc = ys_need_scalar(x, v, f->key, "a format line")))
            break;
        if (strcmp(v->str, f->def)) {
            char what[64];
            snprintf(what, sizeof what, "%s", f->key);
            return ys_fail(x, v, f->hint, "unsupported %s '%s' (this mpcsim reads '%s')", what,
                           v->str, f->def);
        }
        break;
    default: /* YS_INFO, YS_OTHER */ break;
    }
    if (rc && f->hint && x->e && !strstr(x->e->msg, "\n  hint: ")) {
        size_t l = strlen(x->e->msg);
        snprintf(x->e->msg + l, sizeof x->e->msg - l, "\n  hint: %s", f->hint);
    }
    return rc;
}

static int stores(const ys_field *f)
{
    return f->type != YS_FIXED && f->type != YS_INFO && f->type != YS_OTHER;
}

int ys_read(const ys_ctx *x, const yx_node *m, const ys_schema *s, const char *const *extra,
            size_t n_extra, void *obj)
{
    if (m->kind != YX_MAP)
        return ys_fail(x, m, s->doc_ref ? s->doc_ref : NULL, "a %s is a mapping of keys, not %s",
                       s->name, yx_kind_name(m));
    int rc = ys_check_keys(x, m, s, extra, n_extra);
    for (size_t i = 0; !rc && i < s->n; i++) {
        const ys_field *f = &s->field[i];
        const yx_node *v = yx_map_get(m, f->key);
        if (!v && (f->flags & YS_REQ)) {
            char hint[320];
            if (f->type == YS_FIXED)
                snprintf(hint, sizeof hint, "add '%s: %s'%s%s", f->key, f->def, f->hint ? "; " : "",
                         f->hint ? f->hint : "");
            else
                snprintf(hint, sizeof hint, "add '%s: …' (%s)%s%s", f->key, f->doc ? f->doc : "",
                         f->hint ? "; " : "", f->hint ? f->hint : "");
            return ys_fail(x, m, hint, "missing required key '%s' in '%s'", f->key, s->name);
        }
        if (v && (stores(f) || f->type == YS_FIXED))
            rc = ys_read_field(x, v, f, obj);
    }
    return rc;
}

int ys_set_text(const ys_field *f, const char *text, void *obj, errbuf *e)
{
    yx_node v = {.kind = YX_SCALAR, .line = 0, .col = 0, .str = (char *)text};
    ys_ctx x = {NULL, e, 0};
    return ys_read_field(&x, &v, f, obj);
}

int ys_defaults(const ys_schema *s, void *obj)
{
    for (size_t i = 0; i < s->n; i++) {
        const ys_field *f = &s->field[i];
        if (!f->def || !stores(f))
            continue;
        errbuf e;
        if (ys_set_text(f, f->def, obj, &e))
            return MS_ERR_INTERNAL; /* a default that does not parse is a bug in the table */
    }
    return MS_OK;
}

int ys_field_equal(const ys_field *f, const void *a, const void *b)
{
    const char *pa = (const char *)a + f->off, *pb = (const char *)b + f->off;
    switch (f->type) {
    case YS_STR: return !strcmp(pa, pb);
    case YS_DBL: return *(const double *)pa == *(const double *)pb;
    case YS_U32: return *(const uint32_t *)pa == *(const uint32_t *)pb;
    case YS_U64: return *(const uint64_t *)pa == *(const uint64_t *)pb;
    case YS_INT:
    case YS_BOOL:
    case YS_ENUM: return *(const int *)pa == *(const int *)pb;
    default: return 1;
    }
}

/* ---- the key table ----------------------------------------------------------------------- */

void ys_type_text(const ys_field *f, char *buf, size_t cap)
{
    size_t o = 0;
    switch (f->type) {
    case YS_U32:
    case YS_U64:
    case YS_INT:
        o = (size_t)snprintf(buf, cap, "integer");
        if (!unbounded(f))
            snprintf(buf + o, cap - o, " %.10g..%.10g", f->lo, f->hi);
        break;
    case YS_DBL:
        o = (size_t)snprintf(buf, cap, (f->flags & YS_WHOLE) ? "integer" : "number");
        if (!unbounded(f))
            snprintf(buf + o, cap - o, " %g..%g", f->lo, f->hi);
        break;
    case YS_BOOL: snprintf(buf, cap, "true|false"); break;
    case YS_STR:
    case YS_ENUM: /* a string with names[] is one of those words */
        if (!f->names) {
            snprintf(buf, cap, "text");
            break;
        }
        buf[0] = '\0';
        for (size_t i = 0; f->names[i] && o < cap; i++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "|" : "", f->names[i]);
        break;
    case YS_FIXED: snprintf(buf, cap, "'%s'", f->def); break;
    case YS_INFO: snprintf(buf, cap, "any (kept, not read)"); break;
    default: snprintf(buf, cap, "%s", f->type_doc ? f->type_doc : "see below"); break;
    }
}

/* Writes text from column col, wrapped before column 80 (continuation lines start at col). */
static void put_wrapped(FILE *out, const char *text, int col)
{
    int at = col, width = 80 - col;
    while (*text) {
        size_t w = strcspn(text, " ");
        if (at > col && at + 1 + (int)w > col + width) {
            fprintf(out, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', out);
            at++;
        }
        fprintf(out, "%.*s", (int)w, text);
        at += (int)w;
        text += w;
        while (*text == ' ')
            text++;
    }
    fputc('\n', out);
}

static void default_text(const ys_field *f, char *def, size_t cap)
{
    if (f->flags & YS_REQ)
        snprintf(def, cap, "required");
    else if (f->def && f->type != YS_FIXED)
        snprintf(def, cap, "%s", f->def);
    else
        snprintf(def, cap, "-");
}

int ys_print(FILE *out, const ys_schema *s)
{
    fprintf(out, "keys of '%s'%s%s%s:\n", s->name, s->doc_ref ? " (" : "",
            s->doc_ref ? s->doc_ref : "", s->doc_ref ? ")" : "");
    /* columns as wide as their longest cell (capped), the meaning wrapped at 80 */
    int kw = 3, tw = 4, dw = 7;
    char type[128], def[64];
    for (size_t i = 0; i < s->n; i++) {
        ys_type_text(&s->field[i], type, sizeof type);
        default_text(&s->field[i], def, sizeof def);
        int k = (int)strlen(s->field[i].key), t = (int)strlen(type), d = (int)strlen(def);
        kw = k > kw ? k : kw;
        tw = t > tw && t <= 24 ? t : tw;
        dw = d > dw && d <= 12 ? d : dw;
    }
    int col = 2 + kw + 2 + tw + 2 + dw + 2;
    fprintf(out, "  %-*s  %-*s  %-*s  meaning\n", kw, "key", tw, "type", dw, "default");
    for (size_t i = 0; i < s->n; i++) {
        const ys_field *f = &s->field[i];
        ys_type_text(f, type, sizeof type);
        default_text(f, def, sizeof def);
        if ((int)strlen(type) > tw || (int)strlen(def) > dw) { /* a long cell: its own line */
            fprintf(out, "  %-*s  %s  %s\n%*s", kw, f->key, type, def, col, "");
        } else {
            fprintf(out, "  %-*s  %-*s  %-*s  ", kw, f->key, tw, type, dw, def);
        }
        put_wrapped(out, f->doc ? f->doc : "", col);
    }
    return ferror(out) ? MS_ERR_IO : MS_OK;
}

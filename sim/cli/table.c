/* table.c — a table of text cells, printed aligned and fitted to a width, as CSV, or for a
 * paper (Markdown, LaTeX with booktabs). */
#include "table.h"

#include <stdlib.h>
#include <string.h>

#include "dbq.h"

/* ---- a table of text cells, printed aligned and fitted to a width, or as CSV ----------- */

void tab_col(table *t, const char *head, int prio, int right)
{
    if (t->cols < REP_MAX_COLS)
        t->c[t->cols++] = (col){head, prio, right, 1};
}

void tab_add(table *t, const char *s)
{
    if (t->oom)
        return;
    if (t->n + 1 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        char **c = realloc(t->cell, cap * sizeof *c);
        if (!c) {
            t->oom = 1;
            return;
        }
        t->cell = c;
        t->cap = cap;
    }
    if (!(t->cell[t->n] = strdup(s ? s : "")))
        t->oom = 1;
    else
        t->n++;
}

const char *tab_get(const table *t, size_t r, size_t c) { return t->cell[r * t->cols + c]; }

void tab_free(table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->cell[i]);
    free(t->cell);
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void tab_csv(const table *t, FILE *f)
{
    for (size_t c = 0; c < t->cols; c++) {
        if (c)
            fputc(',', f);
        csv_field(f, t->c[c].head);
    }
    fputc('\n', f);
    for (size_t r = 0; r < t->rows; r++) {
        for (size_t c = 0; c < t->cols; c++) {
            if (c)
                fputc(',', f);
            csv_field(f, tab_get(t, r, c));
        }
        fputc('\n', f);
    }
}

/* Display width of UTF-8 text (continuation bytes take no column). */
static size_t text_width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Prints text wrapped at width (dbq_wrap). */
static void wrap(FILE *f, const char *s, int width) { dbq_wrap(f, s, width); }

/* Column c's width over rows [r0, r1): its widest cell, or its head. */
static size_t tab_col_width(const table *t, size_t c, size_t r0, size_t r1)
{
    size_t w = text_width(t->c[c].head);
    for (size_t r = r0; r < r1; r++) {
        size_t len = text_width(tab_get(t, r, c));
        w = len > w ? len : w;
    }
    return w;
}

/* Whether column c has nothing to say over rows [r0, r1): no figure in this section, no
 * variant, every run ok, or it is the section's heading (prio 99). */
static int tab_col_blank(const table *t, size_t c, size_t r0, size_t r1)
{
    if (t->c[c].prio == 99)
        return 1;
    int blank = r1 > r0;
    for (size_t r = r0; blank && r < r1; r++)
        blank = !strcmp(tab_get(t, r, c), "-") || !tab_get(t, r, c)[0] ||
                (!strcmp(t->c[c].head, "status") && !strcmp(tab_get(t, r, c), "ok"));
    return blank;
}

/* Whether column c holds one value in every row of [r0, r1), more than one row. */
static int tab_col_same(const table *t, size_t c, size_t r0, size_t r1)
{
    int same = r1 - r0 > 1;
    for (size_t r = r0 + 1; same && r < r1; r++)
        same = !strcmp(tab_get(t, r, c), tab_get(t, r0, c));
    return same;
}

/* Which columns rows [r0, r1) show, and their widths w. Columns among the first `shared` that
 * hold one value go into common ("model llama-2-7b, network lan") instead. */
static void tab_layout(table *t, size_t shared, size_t r0, size_t r1, size_t *w, char *common,
                       size_t n)
{
    size_t cl = 0;
    common[0] = '\0';
    for (size_t c = 0; c < t->cols; c++) {
        t->c[c].shown = 1;
        w[c] = tab_col_width(t, c, r0, r1);
        if (tab_col_blank(t, c, r0, r1)) {
            t->c[c].shown = 0;
            continue;
        }
        if (c < shared && tab_col_same(t, c, r0, r1)) {
            t->c[c].shown = 0;
            cl += (size_t)snprintf(common + cl, cl < n ? n - cl : 0, "%s%s %s", cl ? ", " : "",
                                   t->c[c].head, tab_get(t, r0, c));
        }
    }
}

/* The width the shown columns take, two spaces between two. */
static size_t tab_shown_width(const table *t, const size_t *w)
{
    size_t total = 0, k = 0;
    for (size_t c = 0; c < t->cols; c++)
        if (t->c[c].shown)
            total += w[c] + (k++ ? 2 : 0);
    return total;
}

/* Leaves out the least important columns (the largest prio, the rightmost first) until the
 * rest fits width, keeping at least one and every column of prio 1; names them in dropped. */
static void tab_fit(table *t, const size_t *w, int width, char *dropped, size_t n)
{
    size_t dl = 0;
    dropped[0] = '\0';
    for (;;) {
        size_t k = 0;
        int worst = -1;
        for (size_t c = 0; c < t->cols; c++)
            if (t->c[c].shown) {
                k++;
                if (worst < 0 || t->c[c].prio >= t->c[worst].prio)
                    worst = (int)c;
            }
        if (tab_shown_width(t, w) <= (size_t)width || k <= 1 || t->c[worst].prio <= 1)
            return;
        t->c[worst].shown = 0;
        dl += (size_t)snprintf(dropped + dl, dl < n ? n - dl : 0, "%s%s", dl ? ", " : "",
                               t->c[worst].head);
    }
}

/* Rows [r0, r1) too wide for a table even so: a wrapped paragraph of "head value" per run. */
static void tab_paragraphs(const table *t, size_t r0, size_t r1, int width, FILE *f)
{
    for (size_t r = r0; r < r1; r++) {
        char line[2048];
        size_t n = 0;
        for (size_t c = 0; c < t->cols && n < sizeof line; c++)
            if (t->c[c].shown && tab_get(t, r, c)[0]) /* an empty variant says nothing */
                n += (size_t)snprintf(line + n, sizeof line - n, "%s%s %s", n ? ", " : "",
                                      t->c[c].head, tab_get(t, r, c));
        wrap(f, line, width);
    }
}

/* The bytes of s's first line piece in a column lim wide: all of s when it fits, else the
 * longest prefix of at most lim characters that ends after a comma or a space or before a '('
 * (else after an underscore) (a label such as h2o(heavy_ratio=0.05,recent_ratio=0.05) wraps at its
 * options, a head such as attn_mass_recall at its words), else lim characters. */
static size_t piece_len(const char *s, size_t lim)
{
    size_t b = 0, chars = 0, brk = 0, weak = 0;
    while (s[b] && chars < lim) {
        b++;
        while (((unsigned char)s[b] & 0xc0) == 0x80)
            b++;
        chars++;
        if (s[b - 1] == ',' || s[b - 1] == ' ' || s[b] == '(')
            brk = b;
        else if (s[b - 1] == '_')
            weak = b;
    }
    return !s[b] ? b : brk ? brk : weak ? weak : b;
}

/* The heads and rows [r0, r1) aligned to the widths w: numbers to the right, the last column
 * without trailing spaces. A cell wider than its column (narrowed by tab_narrow) goes on over
 * as many lines as it needs. */
static void tab_rows(const table *t, const size_t *w, size_t r0, size_t r1, FILE *f)
{
    size_t lastc = 0;
    for (size_t c = 0; c < t->cols; c++)
        if (t->c[c].shown)
            lastc = c;
    const char *rest[REP_MAX_COLS];
    for (long r = -1; r < (long)(r1 - r0); r++) {
        for (size_t c = 0; c < t->cols; c++)
            rest[c] = r < 0 ? t->c[c].head : tab_get(t, r0 + (size_t)r, c);
        for (int more = 1; more;) {
            char line[4096];
            size_t n = 0;
            int nk = 0;
            more = 0;
            for (size_t c = 0; c < t->cols; c++) {
                if (!t->c[c].shown)
                    continue;
                size_t len = piece_len(rest[c], w[c]);
                char piece[1024];
                snprintf(piece, sizeof piece, "%.*s", (int)len, rest[c]);
                rest[c] += len;
                while (*rest[c] == ' ')
                    rest[c]++;
                more |= *rest[c] != '\0';
                int pad = (int)(w[c] - text_width(piece));
                if (n < sizeof line)
                    n += (size_t)snprintf(line + n, sizeof line - n, "%s", nk++ ? "  " : "");
                if (n < sizeof line)
                    n += (size_t)(t->c[c].right
                                      ? snprintf(line + n, sizeof line - n, "%*s%s", pad, "", piece)
                                      : snprintf(line + n, sizeof line - n, "%s%*s", piece,
                                                 c == lastc ? 0 : pad, ""));
            }
            n = n < sizeof line ? n : sizeof line - 1;
            while (n > 0 && line[n - 1] == ' ') /* a wrapped cell's lines end early */
                n--;
            fprintf(f, "%.*s\n", (int)n, line);
        }
    }
}

/* Narrows the widest columns one character at a time until the shown columns fit width: the
 * number columns first, down to their widest number and their head's longest word (the head
 * wraps at its underscores), then the label columns (left-aligned) down to 12 characters or
 * their longest word (up to 24: a word is not cut below that); tab_rows then wraps their
 * cells. 1 when they fit. */
static int tab_narrow(const table *t, size_t *w, int width, size_t r0, size_t r1)
{
    size_t floor[REP_MAX_COLS];
    for (size_t c = 0; c < t->cols; c++) {
        floor[c] = 12;
        if (t->c[c].right) /* the longest word of the head */
            for (const char *h = t->c[c].head, *e; *h; h = *e ? e + 1 : e) {
                e = h + strcspn(h, "_ ");
                floor[c] = h == t->c[c].head || (size_t)(e - h) + 1 > floor[c]
                               ? (size_t)(e - h) + (*e != '\0')
                               : floor[c];
            }
        for (size_t r = r0; r < r1; r++) {
            const char *v = tab_get(t, r, c);
            size_t len = t->c[c].right ? text_width(v) : 0;
            while (!t->c[c].right && *v) { /* the longest piece tab_rows would not cut */
                size_t p = piece_len(v, 24);
                len = p > len ? p : len;
                v += p;
                while (*v == ' ')
                    v++;
            }
            floor[c] = len > floor[c] ? len : floor[c];
        }
    }
    while (tab_shown_width(t, w) > (size_t)width) {
        int widest = -1;
        for (int right = 1; right >= 0 && widest < 0; right--)
            for (size_t c = 0; c < t->cols; c++)
                if (t->c[c].shown && t->c[c].right == right && w[c] > floor[c] &&
                    (widest < 0 || w[c] > w[widest]))
                    widest = (int)c;
        if (widest < 0)
            return 0;
        w[widest]--;
    }
    return 1;
}

/* Prints rows [r0, r1): the columns every row shares (among the first `shared`) once above the
 * table, then the table with the least important columns left out until it fits the width
 * (named below it). */
void tab_print(table *t, int width, size_t shared, size_t r0, size_t r1, FILE *f)
{
    size_t w[REP_MAX_COLS];
    char common[1024], dropped[1024];
    tab_layout(t, shared, r0, r1, w, common, sizeof common);
    tab_fit(t, w, width, dropped, sizeof dropped);
    if (common[0]) {
        char line[1100];
        snprintf(line, sizeof line, "all runs: %s", common);
        wrap(f, line, width);
    }
    if (!tab_narrow(t, w, width, r0, r1))
        tab_paragraphs(t, r0, r1, width, f);
    else
        tab_rows(t, w, r0, r1, f);
    if (dropped[0]) {
        char line[1200];
        snprintf(line, sizeof line,
                 "(not shown for the width: %s; --columns N widens, --csv has "
                 "every column)",
                 dropped);
        wrap(f, line, width);
    }
}

/* ---- the same tables for a paper: Markdown, or LaTeX with booktabs ---------------------- */

static void md_text(FILE *f, const char *s)
{
    for (; *s; s++)
        fprintf(f, *s == '|' ? "\\|" : "%c", *s);
}

static void tex_text(FILE *f, const char *s)
{
    for (; *s; s++)
        if (strchr("&%$#_{}", *s))
            fprintf(f, "\\%c", *s);
        else if (*s == '\\')
            fputs("\\textbackslash{}", f);
        else if (*s == '~')
            fputs("\\textasciitilde{}", f);
        else if (*s == '^')
            fputs("\\textasciicircum{}", f);
        else
            fputc(*s, f);
}

/* Rows [r0, r1) as one Markdown or LaTeX (booktabs) table, every column that has something
 * to say (no width limit: a page sets it); the columns every row shares (among the first
 * `shared`) are a line above it: a sentence in Markdown, a comment in LaTeX. */
void tab_paper(table *t, rep_format fmt, size_t shared, size_t r0, size_t r1, FILE *f)
{
    size_t w[REP_MAX_COLS];
    char common[1024];
    int md = fmt == RF_MARKDOWN;
    void (*cell)(FILE *, const char *) = md ? md_text : tex_text;
    tab_layout(t, shared, r0, r1, w, common, sizeof common);
    if (common[0])
        fprintf(f, md ? "All runs: %s.\n\n" : "%% all runs: %s\n", common);
    if (!md) {
        fputs("\\begin{tabular}{", f);
        for (size_t c = 0; c < t->cols; c++)
            if (t->c[c].shown)
                fputc(t->c[c].right ? 'r' : 'l', f);
        fputs("}\n\\toprule\n", f);
    }
    for (long r = -1; r < (long)(r1 - r0); r++) {
        int nk = 0;
        for (size_t c = 0; c < t->cols; c++) {
            if (!t->c[c].shown)
                continue;
            fputs(md ? (nk++ ? " | " : "| ") : nk++ ? " & " : "", f);
            cell(f, r < 0 ? t->c[c].head : tab_get(t, r0 + (size_t)r, c));
        }
        fputs(md ? " |\n" : " \\\\\n", f);
        if (r < 0 && md) {
            for (size_t c = 0; c < t->cols; c++)
                if (t->c[c].shown)
                    fputs(t->c[c].right ? "| ---: " : "| --- ", f);
            fputs("|\n", f);
        } else if (r < 0)
            fputs("\\midrule\n", f);
    }
    if (!md)
        fputs("\\bottomrule\n\\end{tabular}\n", f);
}

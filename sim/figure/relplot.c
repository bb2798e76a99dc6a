/* relplot.c — a faceted relational figure as a gnuplot script (see relplot.h). */
#include "relplot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "figure.h"

/* Okabe and Ito's palette without its yellow, which is too light on white, plus a grey. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000", "#999999"};
#define N_COLOURS (int)(sizeof palette / sizeof palette[0])
/* gnuplot point types: filled circle, square, triangle up and down, diamond; open circle,
 * square, triangle up and down, diamond; cross, plus, star */
static const int markers[] = {7, 5, 9, 11, 13, 6, 4, 8, 10, 12, 2, 1, 3};
#define N_MARKERS (int)(sizeof markers / sizeof markers[0])

/* The layout, in pixels (points for PDF, a hundredth of an inch): a panel's cell and its plot
 * area's margins inside it, the heading above the grid. */
enum { CELL_W = 440, CELL_H = 336, M_LEFT = 84, M_RIGHT = 20, M_TOP = 40, M_BOTTOM = 56 };
enum { HEAD_H = 56, KEY_ROW_H = 20, KEY_PAD = 34 };

int rp_index(relplot *p, int which, const char *name, int hue)
{
    char(*names)[RP_NAME];
    int *n, max;
    switch (which) {
    case 'r': names = p->row_name, n = &p->nrow, max = RP_MAX_FACETS; break;
    case 'c': names = p->col_name, n = &p->ncol, max = RP_MAX_FACETS; break;
    case 'h': names = p->hue_name, n = &p->nhue, max = RP_MAX_HUES; break;
    default: names = p->style_name, n = &p->nstyle, max = RP_MAX_STYLES; break;
    }
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], name) && (which != 's' || p->style_hue[i] == hue))
            return i;
    if (*n == max) {
        p->dropped++;
        return -1;
    }
    snprintf(names[*n], RP_NAME, "%s", name);
    if (which == 's')
        p->style_hue[*n] = hue;
    return (*n)++;
}

int rp_add(relplot *p, int row, int col, int hue, int style, double x, double y)
{
    if (p->n == RP_MAX_POINTS || row < 0 || col < 0 || hue < 0 || style < 0) {
        p->dropped++;
        return -1;
    }
    p->pt[p->n++] = (rp_point){row, col, hue, style, x, y};
    return 0;
}

int rp_front(const double *xs, const double *ys, int n, int dir, int *front)
{
    int *ord = malloc((size_t)(n > 0 ? n : 1) * sizeof *ord), k = 0;
    if (!ord)
        return 0;
    for (int i = 0; i < n; i++)
        ord[i] = i;
    /* by x, then the better y first: a point at the same cost as a better one is beaten */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int a = ord[j - 1], b = ord[j];
            int swap = xs[b] < xs[a] || (xs[b] == xs[a] && dir * ys[b] > dir * ys[a]);
            if (!swap)
                break;
            ord[j - 1] = b, ord[j] = a;
        }
    double best = -INFINITY;
    for (int i = 0; i < n; i++)
        if (dir * ys[ord[i]] > best) {
            best = dir * ys[ord[i]];
            front[k++] = ord[i];
        }
    free(ord);
    return k;
}

/* An axis over values [lo, hi] (all > 0 for a log axis): log when asked, or when a plain
 * decision is asked for and positive values span more than two decades. */
static int axis_log(const rp_axis *a, double lo, double hi)
{
    if (a->log >= 0)
        return a->log && lo > 0;
    return lo > 0 && hi / lo > 100;
}

typedef struct axis_use {
    int log;
    fig_unit u;
} axis_use;

static axis_use axis_decide(const rp_axis *a, double lo, double hi)
{
    return (axis_use){axis_log(a, lo, hi), fig_unit_pick(a->kind, fmax(fabs(lo), fabs(hi)))};
}

static void axis_label(FILE *f, const char *which, const rp_axis *a, const axis_use *u,
                       void (*str)(FILE *, const char *))
{
    char text[200];
    snprintf(text, sizeof text, "%s%s%s%s%s", a->label, u->u.name[0] ? " (" : "", u->u.name,
             u->u.name[0] ? ")" : "", u->log ? ", log" : "");
    fprintf(f, "set %slabel ", which);
    str(f, text);
    fputc('\n', f);
}

static void axis_set(FILE *f, const char *which, const rp_axis *a, const axis_use *u)
{
    if (u->log)
        fprintf(f, "set logscale %s 10\nset %srange [*:*]\n", which, which);
    else
        fprintf(f, "unset logscale %s\nset %srange [%s:*]\n", which, which, a->zero ? "0" : "*");
}

/* Writes one inline data block named $<tag><r>_<c>_<k> of the points of panel (r, c) that
 * match (hue or style k; by x), in the axes' units. Its number of points. */
static int block(FILE *f, const relplot *p, char tag, int r, int c, int k, double xdiv, double ydiv)
{
    int idx[RP_MAX_POINTS], n = 0;
    for (int i = 0; i < p->n; i++) {
        const rp_point *q = &p->pt[i];
        if (q->row == r && q->col == c && (tag == 'h' ? q->hue : q->style) == k && isfinite(q->x) &&
            isfinite(q->y))
            idx[n++] = i;
    }
    if (!n)
        return 0;
    for (int i = 1; i < n; i++) /* by x */
        for (int j = i; j > 0 && p->pt[idx[j]].x < p->pt[idx[j - 1]].x; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    fprintf(f, "$%c%d_%d_%d << EOD\n", tag, r, c, k);
    for (int i = 0; i < n; i++)
        fprintf(f, "%.9g %.9g\n", p->pt[idx[i]].x / xdiv, p->pt[idx[i]].y / ydiv);
    fputs("EOD\n", f);
    return n;
}

/* The panel's Pareto front as $f<r>_<c>: 1 when it has one. */
static int front_block(FILE *f, const relplot *p, int r, int c, double xdiv, double ydiv)
{
    static double xs[RP_MAX_POINTS], ys[RP_MAX_POINTS];
    static int fr[RP_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (p->pt[i].row == r && p->pt[i].col == c && isfinite(p->pt[i].x) && isfinite(p->pt[i].y))
            xs[n] = p->pt[i].x, ys[n++] = p->pt[i].y;
    int k = rp_front(xs, ys, n, p->pareto_dir, fr);
    if (k < 1)
        return 0;
    fprintf(f, "$f%d_%d << EOD\n", r, c);
    for (int i = 0; i < k; i++)
        fprintf(f, "%.9g %.9g\n", xs[fr[i]] / xdiv, ys[fr[i]] / ydiv);
    fputs("EOD\n", f);
    return 1;
}

/* Whether hue h has points at two x or more in panel (r, c): else a line would only join
 * points above each other. */
static int hue_spread(const relplot *p, int r, int c, int h)
{
    double x0 = NAN;
    for (int i = 0; i < p->n; i++) {
        const rp_point *q = &p->pt[i];
        if (q->row != r || q->col != c || q->hue != h || !isfinite(q->x) || !isfinite(q->y))
            continue;
        if (isnan(x0))
            x0 = q->x;
        else if (q->x != x0)
            return 1;
    }
    return 0;
}

/* The style's marker: its place among its hue's styles. */
static int style_marker(const relplot *p, int s)
{
    int k = 0;
    for (int i = 0; i < s; i++)
        k += p->style_hue[i] == p->style_hue[s];
    return markers[k % N_MARKERS];
}

static const char *hue_colour(int h) { return palette[h % N_COLOURS]; }
static int hue_dash(int h) { return 1 + (h / N_COLOURS) % 4; }

/* The lowest and highest x (col < 0), or y of panel (row, col): each panel has its own y
 * axis (rows are usually networks or protocols, whose costs differ by orders of magnitude). */
static void span(const relplot *p, int row, int col, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < p->n; i++) {
        if (col >= 0 && (p->pt[i].col != col || p->pt[i].row != row))
            continue;
        double v = col < 0 ? p->pt[i].x : p->pt[i].y;
        if (isfinite(v))
            *lo = fmin(*lo, v), *hi = fmax(*hi, v);
    }
    if (!isfinite(*lo))
        *lo = 0, *hi = 1;
}

int rp_write(const relplot *p, FILE *f, const char *term, const char *outfile,
             void (*str)(FILE *, const char *))
{
    int nrow = p->nrow > 0 ? p->nrow : 1, ncol = p->ncol > 0 ? p->ncol : 1;
    size_t longest = 8;
    for (int s = 0; s < p->nstyle; s++)
        longest = strlen(p->style_name[s]) > longest ? strlen(p->style_name[s]) : longest;
    /* a legend entry's width as gnuplot lays the key out (about 8.4 pixels a character at
     * ',9', the sample and gaps): it puts fewer columns than asked when they do not fit */
    int W = ncol * CELL_W, entry = 56 + (int)(8.4 * (double)longest);
    int kcols = (W - 40) / entry > 0 ? (W - 40) / entry : 1;
    if (kcols > p->nstyle && p->nstyle > 0)
        kcols = p->nstyle;
    /* a legend of more than 12 rows: up to three columns, on a wider canvas */
    int kwant = (p->nstyle + 11) / 12 < 3 ? (p->nstyle + 11) / 12 : 3;
    if (kcols < kwant)
        kcols = kwant;
    int krows = p->nstyle > 0 ? (p->nstyle + kcols - 1) / kcols : 0;
    /* a legend, the heading or its second line wider than the panels: a wider canvas, the grid
     * in its middle (about 11.5 and 7 pixels a character at those font sizes) */
    int wide = kcols * entry + 40, tw = (int)(11.5 * (double)strlen(p->title)) + 40,
        sw = (int)(7.0 * (double)strlen(p->subtitle)) + 40, x0 = 0;
    wide = tw > wide ? tw : wide;
    wide = sw > wide ? sw : wide;
    if (W < wide) {
        x0 = (wide - W) / 2;
        W = wide;
    }
    int H = HEAD_H + nrow * CELL_H + (krows ? KEY_PAD + krows * KEY_ROW_H : 0);
    int pdf = !strcmp(term, "pdfcairo");
    if (pdf)
        fprintf(f, "set terminal pdfcairo size %.2fin,%.2fin font 'Sans,8'\n", W / 100.0,
                H / 100.0);
    else
        fprintf(f, "set terminal %s size %d,%d%s font 'Sans,10'\n", term, W, H,
                strcmp(term, "svg") ? " noenhanced" : " noenhanced background '#ffffff'");
    fputs("set encoding utf8\nset output ", f);
    str(f, outfile);
    fputs("\nset termoption noenhanced\nset multiplot\nset grid lc rgb '#dddddd'\n"
          "set border lc rgb '#444444'\nset key off\nset tics nomirror out scale 0.6\n",
          f);

    double xlo, xhi;
    span(p, -1, -1, &xlo, &xhi);
    axis_use xall = axis_decide(&p->x, xlo, xhi);
    for (int r = 0; r < nrow; r++)
        for (int c = 0; c < ncol; c++) {
            const rp_axis *ya = &p->y[p->y_per_col ? c : 0], *xa = p->x_per_col ? &p->xc[c] : &p->x;
            axis_use xu = xall;
            if (p->x_per_col) { /* this panel's x values (a column's costs differ by row) */
                xlo = INFINITY, xhi = -INFINITY;
                for (int i = 0; i < p->n; i++)
                    if (p->pt[i].row == r && p->pt[i].col == c && isfinite(p->pt[i].x))
                        xlo = fmin(xlo, p->pt[i].x), xhi = fmax(xhi, p->pt[i].x);
                if (!isfinite(xlo))
                    xlo = 0, xhi = 1;
                xu = axis_decide(xa, xlo, xhi);
            }
            double ylo, yhi;
            span(p, r, c, &ylo, &yhi);
            axis_use yu = axis_decide(ya, ylo, yhi);
            double L = (double)(x0 + c * CELL_W + M_LEFT) / W,
                   R = (double)(x0 + (c + 1) * CELL_W - M_RIGHT) / W;
            double T = 1 - (double)(HEAD_H + r * CELL_H + M_TOP) / H;
            double B = 1 - (double)(HEAD_H + (r + 1) * CELL_H - M_BOTTOM) / H;
            fprintf(f, "\n# panel %d, %d\n", r + 1, c + 1);
            int any = 0, hue_has[RP_MAX_HUES], style_has[RP_MAX_STYLES];
            for (int h = 0; h < p->nhue; h++)
                any += (hue_has[h] = block(f, p, 'h', r, c, h, xu.u.div, yu.u.div) > 0);
            /* a line joins a family's configurations (each one point: x is their budget), or,
             * when a configuration has several points (x is a prompt length, say), each
             * configuration's own points */
            int per_style[RP_MAX_HUES] = {0};
            for (int s = 0; s < p->nstyle; s++) {
                style_has[s] = block(f, p, 's', r, c, s, xu.u.div, yu.u.div);
                per_style[p->style_hue[s]] |= style_has[s] > 1;
            }
            int front = p->pareto && any && front_block(f, p, r, c, xu.u.div, yu.u.div);
            if (r == 0 && c == 0) { /* the heading, once, above the grid */
                fputs("set label 901 ", f);
                str(f, p->title);
                fprintf(f, " at screen 0.5, %.5f center font ',13'\n", 1 - 20.0 / H);
                fputs("set label 902 ", f);
                str(f, p->subtitle);
                fprintf(f, " at screen 0.5, %.5f center font ',9' tc rgb '#555555'\n",
                        1 - 40.0 / H);
            }
            fprintf(f,
                    "set lmargin at screen %.5f\nset rmargin at screen %.5f\n"
                    "set tmargin at screen %.5f\nset bmargin at screen %.5f\n",
                    L, R, T, B);
            char title[2 * RP_NAME + 8];
            const char *rn = p->nrow > 0 ? p->row_name[r] : "",
                       *cn = p->ncol > 0 && !p->y_per_col ? p->col_name[c] : ""; /* else: y label */
            snprintf(title, sizeof title, "%s%s%s", rn, rn[0] && cn[0] ? " · " : "", cn);
            if (strlen(title) > 64) /* a panel's width holds about 64 characters */
                memcpy(title + 61, "...", 4);
            fputs("set title ", f);
            str(f, title);
            fputs(" font ',10'\n", f);
            axis_label(f, "x", xa, &xu, str);
            axis_label(f, "y", ya, &yu, str);
            axis_set(f, "x", xa, &xu);
            axis_set(f, "y", ya, &yu);
            if (!any) { /* a panel without points says so, on fixed axes */
                fputs("unset logscale xy\nset xrange [0:1]\nset yrange [0:1]\n"
                      "set label 903 'no runs here' at graph 0.5, 0.5 center tc rgb '#777777'\n"
                      "plot NaN notitle\nunset label 903\n",
                      f);
            } else {
                fputs("plot ", f);
                int k = 0;
                for (int h = 0; h < p->nhue; h++)
                    if (hue_has[h] && !per_style[h] && hue_spread(p, r, c, h))
                        fprintf(
                            f, "%s$h%d_%d_%d using 1:2 with lines lc rgb '%s' dt %d lw 1.6 notitle",
                            k++ ? ", \\\n     " : "", r, c, h, hue_colour(h), hue_dash(h));
                for (int s = 0; s < p->nstyle; s++)
                    if (style_has[s] > 1 && per_style[p->style_hue[s]])
                        fprintf(
                            f, "%s$s%d_%d_%d using 1:2 with lines lc rgb '%s' dt %d lw 1.6 notitle",
                            k++ ? ", \\\n     " : "", r, c, s, hue_colour(p->style_hue[s]),
                            hue_dash(p->style_hue[s]));
                for (int s = 0; s < p->nstyle; s++)
                    if (style_has[s])
                        fprintf(f,
                                "%s$s%d_%d_%d using 1:2 with points lc rgb '%s' pt %d "
                                "ps 1.3 notitle",
                                k++ ? ", \\\n     " : "", r, c, s, hue_colour(p->style_hue[s]),
                                style_marker(p, s));
                if (front)
                    fprintf(f,
                            ", \\\n     $f%d_%d using 1:2 with steps lc rgb '#222222' dt 2 "
                            "lw 1 notitle",
                            r, c);
                fputc('\n', f);
            }
            if (r == 0 && c == 0)
                fputs("unset label 901\nunset label 902\n", f);
        }

    if (krows) { /* the legend: one entry per style, under the grid */
        double T = 1 - (double)(HEAD_H + nrow * CELL_H + 10) / H;
        fprintf(f,
                "\n# legend\nunset title\nunset xlabel\nunset ylabel\nunset tics\nunset border\n"
                "unset grid\nunset logscale xy\nset xrange [0:1]\nset yrange [0:1]\n"
                "set lmargin at screen 0.01\nset rmargin at screen 0.99\n"
                "set tmargin at screen %.5f\nset bmargin at screen 0\n"
                "set key at screen 0.5, %.5f center top horizontal maxcols %d maxrows %d "
                "Left reverse samplen 2.5 width 2 spacing 1.15 font ',9'\nplot ",
                T, T, kcols, krows);
        for (int s = 0; s < p->nstyle; s++) {
            int h = p->style_hue[s];
            fprintf(f, "%sNaN with linespoints lc rgb '%s' dt %d lw 1.6 pt %d ps 1.2 title ",
                    s ? ", \\\n     " : "", hue_colour(h), hue_dash(h), style_marker(p, s));
            str(f, p->style_name[s]);
        }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    return ferror(f) ? -1 : 0;
}

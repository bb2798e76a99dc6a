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

int rp_add_grp(relplot *p, int row, int col, int hue, int style, int grp, double x, double y)
{
    if (p->n == RP_MAX_POINTS || row < 0 || col < 0 || hue < 0 || style < 0 || grp < 0) {
        p->dropped++;
        return -1;
    }
    p->pt[p->n++] = (rp_point){row, col, hue, style, grp, x, y};
    return 0;
}

int rp_add(relplot *p, int row, int col, int hue, int style, double x, double y)
{
    return rp_add_grp(p, row, col, hue, style, 0, x, y);
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

/* Whether point q is in panel (r, c), of hue or style k (tag 'h' or 's'), in group g (any when
 * g < 0), and drawable. */
static int in_block(const rp_point *q, char tag, int r, int c, int k, int g)
{
    return q->row == r && q->col == c && (tag == 'h' ? q->hue : q->style) == k &&
           (g < 0 || q->grp == g) && isfinite(q->x) && isfinite(q->y);
}

/* The number of points block() would write. */
static int block_size(const relplot *p, char tag, int r, int c, int k, int g)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += in_block(&p->pt[i], tag, r, c, k, g);
    return n;
}

/* A block's name: $<tag><r>_<c>_<k>, and _<g> for a group when g >= 0. */
static void block_name(FILE *f, char tag, int r, int c, int k, int g)
{
    fprintf(f, "$%c%d_%d_%d", tag, r, c, k);
    if (g >= 0)
        fprintf(f, "_%d", g);
}

/* Writes one inline data block of the points of panel (r, c) that match (hue or style k, group g
 * or any when g < 0; by x), in the axes' units. Its number of points. */
static int block(FILE *f, const relplot *p, char tag, int r, int c, int k, int g, double xdiv,
                 double ydiv)
{
    int idx[RP_MAX_POINTS], n = 0;
    for (int i = 0; i < p->n; i++)
        if (in_block(&p->pt[i], tag, r, c, k, g))
            idx[n++] = i;
    if (!n)
        return 0;
    for (int i = 1; i < n; i++) /* by x */
        for (int j = i; j > 0 && p->pt[idx[j]].x < p->pt[idx[j - 1]].x; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    block_name(f, tag, r, c, k, g);
    fputs(" << EOD\n", f);
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

/* Whether hue h has points at two x or more in panel (r, c), group g: else a line would only
 * join points above each other. */
static int hue_spread(const relplot *p, int r, int c, int h, int g)
{
    double x0 = NAN;
    for (int i = 0; i < p->n; i++) {
        const rp_point *q = &p->pt[i];
        if (!in_block(q, 'h', r, c, h, g))
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
/* A line's dash type: its hue's, or dashed when it lies on another line. */
static int dash(int h, int on) { return on ? (hue_dash(h) == 2 ? 4 : 2) : hue_dash(h); }

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

/* The hollow marker of the same shape (a ring around a filled one). */
static int hollow(int pt)
{
    switch (pt) {
    case 7: return 6;
    case 5: return 4;
    case 9: return 8;
    case 11: return 10;
    case 13: return 12;
    default: return pt;
    }
}

/* A panel's axes as drawn: x's and y's units and scales, and the spans of its values. */
typedef struct panel_ax {
    axis_use x, y;
    double xlo, xhi, ylo, yhi;
    int npts; /* drawable points */
} panel_ax;

static panel_ax panel_axes(const relplot *p, int r, int c, axis_use xall)
{
    panel_ax a = {.x = xall};
    const rp_axis *ya = &p->y[p->y_per_col ? c : 0], *xa = p->x_per_col ? &p->xc[c] : &p->x;
    a.xlo = a.ylo = INFINITY, a.xhi = a.yhi = -INFINITY;
    for (int i = 0; i < p->n; i++) {
        const rp_point *q = &p->pt[i];
        if (q->row != r || q->col != c)
            continue;
        if (isfinite(q->x))
            a.xlo = fmin(a.xlo, q->x), a.xhi = fmax(a.xhi, q->x);
        a.npts += isfinite(q->x) && isfinite(q->y);
    }
    if (!isfinite(a.xlo))
        a.xlo = 0, a.xhi = 1;
    if (p->x_per_col) /* this panel's x values (a column's costs differ by row) */
        a.x = axis_decide(xa, a.xlo, a.xhi);
    span(p, r, c, &a.ylo, &a.yhi);
    a.y = axis_decide(ya, a.ylo, a.yhi);
    return a;
}

/* Whether a and b fall within 2 % of an axis over [lo, hi] of each other (a marker is about 3.5 %
 * wide: they mostly cover each other), on its scale; or are equal. */
static int near(double a, double b, double lo, double hi, int log, int zero)
{
    if (fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)))
        return 1;
    if (log)
        return a > 0 && b > 0 && hi > lo && fabs(log10(a / b)) <= 0.02 * log10(hi / lo);
    double from = zero ? fmin(lo, 0) : lo;
    return hi > from && fabs(a - b) <= 0.02 * (hi - from);
}

/* Whether every point of style s in panel (r, c) lies on a point of style t there (and s has
 * one). */
static int lies_on(const relplot *p, const panel_ax *a, int r, int c, int s, int t)
{
    const rp_axis *xa = p->x_per_col ? &p->xc[c] : &p->x, *ya = &p->y[p->y_per_col ? c : 0];
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        const rp_point *q = &p->pt[i];
        if (!in_block(q, 's', r, c, s, -1))
            continue;
        int hit = 0;
        for (int j = 0; j < p->n && !hit; j++) {
            const rp_point *o = &p->pt[j];
            hit = in_block(o, 's', r, c, t, -1) &&
                  near(q->x, o->x, a->xlo, a->xhi, a->x.log, xa->zero) &&
                  near(q->y, o->y, a->ylo, a->yhi, a->y.log, ya->zero);
        }
        if (!hit)
            return 0;
        n++;
    }
    return n > 0;
}

/* The configurations whose points in a panel all lie on those of an earlier one of another
 * family: over[s] is the first it lies on (-1 for none), depth[s] how many rings it draws
 * outside the filled marker (one more than the deepest it lies on, at most MAX_DEPTH). */
enum { MAX_DEPTH = 2 };
static void overlays(const relplot *p, panel_ax ax[RP_MAX_FACETS][RP_MAX_FACETS], int nrow,
                     int ncol, int *over, int *depth)
{
    for (int s = 0; s < p->nstyle; s++) {
        over[s] = -1, depth[s] = 0;
        for (int t = 0; t < s; t++) {
            if (p->style_hue[t] == p->style_hue[s])
                continue;
            int on = 0;
            for (int r = 0; r < nrow && !on; r++)
                for (int c = 0; c < ncol && !on; c++)
                    on = lies_on(p, &ax[r][c], r, c, s, t);
            if (!on)
                continue;
            if (over[s] < 0)
                over[s] = t;
            if (depth[s] < depth[t] + 1)
                depth[s] = depth[t] + 1 < MAX_DEPTH ? depth[t] + 1 : MAX_DEPTH;
        }
    }
}

/* A line to draw: the points of hue or style k ('h', 's') in group g. */
typedef struct line_ref {
    char tag;
    int k, g;
} line_ref;

int rp_write(const relplot *p, FILE *f, const char *term, const char *outfile,
             void (*str)(FILE *, const char *))
{
    static panel_ax ax[RP_MAX_FACETS][RP_MAX_FACETS];
    int nrow = p->nrow > 0 ? p->nrow : 1, ncol = p->ncol > 0 ? p->ncol : 1;
    double xlo, xhi;
    span(p, -1, -1, &xlo, &xhi);
    axis_use xall = axis_decide(&p->x, xlo, xhi);
    int ngrp = 1;
    for (int i = 0; i < p->n; i++)
        ngrp = p->pt[i].grp >= ngrp ? p->pt[i].grp + 1 : ngrp;
    /* the grid: each row's panels with points, left-aligned; rows without any dropped (all
     * panels kept when none has points, each saying so) */
    int colpos[RP_MAX_FACETS][RP_MAX_FACETS], rowpos[RP_MAX_FACETS], gr = 0, gc = 0, anyp = 0;
    for (int r = 0; r < nrow; r++)
        for (int c = 0; c < ncol; c++) {
            ax[r][c] = panel_axes(p, r, c, xall);
            anyp |= ax[r][c].npts > 0;
        }
    for (int r = 0; r < nrow; r++) {
        int k = 0;
        for (int c = 0; c < ncol; c++)
            colpos[r][c] = !anyp || ax[r][c].npts ? k++ : -1;
        rowpos[r] = k ? gr++ : -1;
        gc = k > gc ? k : gc;
    }
    /* a family's line dashed when all its configurations lie on others' (it is hidden), a
     * configuration's own line when it does */
    int over[RP_MAX_STYLES], depth[RP_MAX_STYLES], hue_over[RP_MAX_HUES], rings = 0;
    for (int h = 0; h < p->nhue; h++)
        hue_over[h] = 1;
    overlays(p, ax, nrow, ncol, over, depth);
    char(*legend)[2 * RP_NAME + 8] =
        malloc((size_t)(p->nstyle > 0 ? p->nstyle : 1) * sizeof *legend);
    line_ref *lines = malloc((size_t)(p->nhue + p->nstyle + 1) * (size_t)ngrp * sizeof *lines);
    if (!legend || !lines) {
        free(legend);
        free(lines);
        return -1;
    }
    size_t longest = 8;
    for (int s = 0; s < p->nstyle; s++) {
        if (over[s] >= 0)
            snprintf(legend[s], sizeof legend[s], "%s (on %s)", p->style_name[s],
                     p->style_name[over[s]]);
        else
            snprintf(legend[s], sizeof legend[s], "%s", p->style_name[s]);
        longest = strlen(legend[s]) > longest ? strlen(legend[s]) : longest;
        hue_over[p->style_hue[s]] &= over[s] >= 0;
        rings |= over[s] >= 0;
    }
    char sub[sizeof p->subtitle + 80];
    snprintf(sub, sizeof sub, "%s%s", p->subtitle,
             rings ? "; a ring marker, dashed line: a configuration on another's points" : "");
    /* a legend entry's width as gnuplot lays the key out (about 8.4 pixels a character at
     * ',9', the sample and gaps): it puts fewer columns than asked when they do not fit */
    int W = gc * CELL_W, entry = 56 + (int)(8.4 * (double)longest);
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
        sw = (int)(7.0 * (double)strlen(sub)) + 40, x0 = 0;
    wide = tw > wide ? tw : wide;
    wide = sw > wide ? sw : wide;
    if (W < wide) {
        x0 = (wide - W) / 2;
        W = wide;
    }
    int H = HEAD_H + gr * CELL_H + (krows ? KEY_PAD + krows * KEY_ROW_H : 0);
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

    int first = 1;
    for (int r = 0; r < nrow; r++)
        for (int c = 0; c < ncol; c++) {
            if (rowpos[r] < 0 || colpos[r][c] < 0)
                continue;
            const rp_axis *ya = &p->y[p->y_per_col ? c : 0], *xa = p->x_per_col ? &p->xc[c] : &p->x;
            axis_use xu = ax[r][c].x, yu = ax[r][c].y;
            int pr = rowpos[r], pc = colpos[r][c];
            double L = (double)(x0 + pc * CELL_W + M_LEFT) / W,
                   R = (double)(x0 + (pc + 1) * CELL_W - M_RIGHT) / W;
            double T = 1 - (double)(HEAD_H + pr * CELL_H + M_TOP) / H;
            double B = 1 - (double)(HEAD_H + (pr + 1) * CELL_H - M_BOTTOM) / H;
            fprintf(f, "\n# panel %d, %d\n", r + 1, c + 1);
            int any = ax[r][c].npts > 0, style_has[RP_MAX_STYLES], nl = 0;
            for (int s = 0; s < p->nstyle; s++) /* the markers: all of a style's points */
                style_has[s] = block(f, p, 's', r, c, s, -1, xu.u.div, yu.u.div);
            /* the lines, in each group: a line joins a family's configurations (each one
             * point: x is their budget), or, when a configuration has several points (x is a
             * prompt length, say), each configuration's own points */
            for (int g = 0; g < ngrp; g++) {
                int per_style[RP_MAX_HUES] = {0};
                for (int s = 0; s < p->nstyle; s++)
                    per_style[p->style_hue[s]] |= block_size(p, 's', r, c, s, g) > 1;
                for (int h = 0; h < p->nhue; h++)
                    if (!per_style[h] && hue_spread(p, r, c, h, g)) {
                        block(f, p, 'h', r, c, h, ngrp > 1 ? g : -1, xu.u.div, yu.u.div);
                        lines[nl++] = (line_ref){'h', h, g};
                    }
                for (int s = 0; s < p->nstyle; s++)
                    if (per_style[p->style_hue[s]] && block_size(p, 's', r, c, s, g) > 1) {
                        if (ngrp > 1)
                            block(f, p, 's', r, c, s, g, xu.u.div, yu.u.div);
                        lines[nl++] = (line_ref){'s', s, g};
                    }
            }
            int front = p->pareto && any && front_block(f, p, r, c, xu.u.div, yu.u.div);
            if (first) { /* the heading, once, above the grid */
                fputs("set label 901 ", f);
                str(f, p->title);
                fprintf(f, " at screen 0.5, %.5f center font ',13'\n", 1 - 20.0 / H);
                fputs("set label 902 ", f);
                str(f, sub);
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
            if (!any) { /* a panel without points (only when no panel has any) says so */
                fputs("unset logscale xy\nset xrange [0:1]\nset yrange [0:1]\n"
                      "set label 903 'no runs here' at graph 0.5, 0.5 center tc rgb '#777777'\n"
                      "plot NaN notitle\nunset label 903\n",
                      f);
            } else {
                fputs("plot ", f);
                int k = 0;
                for (int l = 0; l < nl; l++) {
                    int h = lines[l].tag == 'h' ? lines[l].k : p->style_hue[lines[l].k];
                    fputs(k++ ? ", \\\n     " : "", f);
                    block_name(f, lines[l].tag, r, c, lines[l].k, ngrp > 1 ? lines[l].g : -1);
                    fprintf(f, " using 1:2 with lines lc rgb '%s' dt %d lw 1.6 notitle",
                            hue_colour(h),
                            dash(h, lines[l].tag == 'h' ? hue_over[h] : over[lines[l].k] >= 0));
                }
                for (int s = 0; s < p->nstyle; s++)
                    if (style_has[s])
                        fprintf(f,
                                "%s$s%d_%d_%d using 1:2 with points lc rgb '%s' pt %d "
                                "ps %.1f notitle",
                                k++ ? ", \\\n     " : "", r, c, s, hue_colour(p->style_hue[s]),
                                over[s] >= 0 ? hollow(style_marker(p, s)) : style_marker(p, s),
                                1.3 + 0.9 * depth[s]);
                if (front)
                    fprintf(f,
                            ", \\\n     $f%d_%d using 1:2 with steps lc rgb '#222222' dt 2 "
                            "lw 1 notitle",
                            r, c);
                fputc('\n', f);
            }
            if (first)
                fputs("unset label 901\nunset label 902\n", f);
            first = 0;
        }

    if (krows) { /* the legend: one entry per style, under the grid */
        double T = 1 - (double)(HEAD_H + gr * CELL_H + 10) / H;
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
            fprintf(f, "%sNaN with linespoints lc rgb '%s' dt %d lw 1.6 pt %d ps %.1f title ",
                    s ? ", \\\n     " : "", hue_colour(h), dash(h, hue_over[h] || over[s] >= 0),
                    over[s] >= 0 ? hollow(style_marker(p, s)) : style_marker(p, s),
                    1.2 + 0.5 * depth[s]);
            str(f, legend[s]);
        }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    free(legend);
    free(lines);
    return ferror(f) ? -1 : 0;
}

/* relplot.h — a faceted relational figure, in the manner of seaborn's relplot, drawn with
 * gnuplot: points (row facet, column facet, hue, style, x, y) laid out as a grid of panels of a
 * fixed size, one colour per hue (a policy family) with a line joining its points in x order,
 * one marker per style (a policy configuration: its budget) within its hue, and one legend for
 * the whole figure below the panels. The palette is Okabe and Ito's colour-blind-safe one (eight
 * colours; past eight hues the lines are dashed), the markers thirteen shapes, so 104 series
 * stay apart. An axis of bytes or seconds starts at 0 unless its values span more than two decades,
 * where it goes log; every axis is in the unit its largest value reads best in.
 *
 * A panel nothing lands in is not drawn: each row keeps its panels with points, left-aligned, and
 * every panel's title names its row and column. A configuration whose markers lie on those of an
 * earlier one of another family in a panel (each within 2 % of the axes) is drawn with hollow
 * markers of a larger size, ringing the filled ones, and its legend entry
 * names the one it lies on: both stay visible; its line is dashed (a family's line when all its
 * configurations lie on others).
 *
 * The caller fills a relplot (rp_add per point), then rp_write writes one self-contained gnuplot
 * script (data inline) that draws it. Nothing here reads a database. */
#ifndef MPCSIM_RELPLOT_H
#define MPCSIM_RELPLOT_H

#include <stdio.h>

#define RP_MAX_FACETS 16 /* rows, and columns */
#define RP_MAX_HUES 32   /* families */
#define RP_MAX_STYLES 96 /* configurations over all families */
#define RP_MAX_POINTS 8192
#define RP_NAME 160

typedef struct rp_axis {
    char label[128]; /* without the unit: "decode step, online bytes" */
    int kind;        /* 's' seconds, 'B' bytes, 0 a plain number */
    int log;         /* -1 decide from the data, 0 linear, 1 log */
    int zero;        /* a linear axis starts at 0 */
} rp_axis;

typedef struct rp_point {
    int row, col, hue, style;
    int grp; /* the series within a style: a line joins only points of one group (0 by default) */
    double x, y;
} rp_point;

typedef struct relplot {
    char title[256], subtitle[640];
    rp_axis x, y[RP_MAX_FACETS]; /* y per column (columns may be different metrics) */
    int y_per_col;               /* y[c] for column c, else y[0] for all */
    rp_axis xc[RP_MAX_FACETS];   /* x per column, when x_per_col (else x for all) */
    int x_per_col;
    char row_name[RP_MAX_FACETS][RP_NAME], col_name[RP_MAX_FACETS][RP_NAME];
    char hue_name[RP_MAX_HUES][RP_NAME];
    char style_name[RP_MAX_STYLES][RP_NAME]; /* the legend's entry */
    int style_hue[RP_MAX_STYLES];            /* the hue a style belongs to */
    int nrow, ncol, nhue, nstyle;
    int pareto;     /* mark each panel's Pareto front */
    int pareto_dir; /* +1 higher y is better, -1 lower; x: lower is better */
    rp_point pt[RP_MAX_POINTS];
    int n;
    int dropped; /* points past a limit (facets, hues, styles, points) */
} relplot;

/* The index of name among the rows (which 'r'), columns ('c'), hues ('h') or styles ('s'; hue is
 * its hue), added when new; -1 when a limit is reached (counted in dropped). */
int rp_index(relplot *p, int which, const char *name, int hue);
/* Adds a point; 0, or -1 past RP_MAX_POINTS (counted in dropped). */
int rp_add(relplot *p, int row, int col, int hue, int style, double x, double y);
/* The same, in group grp (>= 0): points of one configuration that differ in something else than
 * x (the model, say) are in different groups, and no line joins points of different groups. */
int rp_add_grp(relplot *p, int row, int col, int hue, int style, int grp, double x, double y);
/* The script drawing p with gnuplot's terminal term (pngcairo, png, svg, pdfcairo) to outfile;
 * str writes a string as a gnuplot string literal (the caller's quoting). 0, or -1 on a write
 * error. */
int rp_write(const relplot *p, FILE *f, const char *term, const char *outfile,
             void (*str)(FILE *, const char *));

/* The Pareto front of n points (x lower is better, y better in direction dir): the indices into
 * xs/ys of the points no other point beats in both, by increasing x, into front; their number. */
int rp_front(const double *xs, const double *ys, int n, int dir, int *front);

#endif

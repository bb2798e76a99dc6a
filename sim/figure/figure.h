/* figure.h — the data model of a figure, apart from the database queries that fill it
 * (sim/cli/cmd_plot.c) and from the gnuplot scripts that draw it: a figure is a grid of cells
 * (panels); a cell holds series (one block of points each, a colour index each), its y axis'
 * label with the unit the values were scaled to, and its x range; a bar cell holds stacked
 * categories per label. Units are picked so the largest value reads best; an axis goes log when
 * its values span a wide range. */
#ifndef MPCSIM_FIGURE_H
#define MPCSIM_FIGURE_H

#include <limits.h>
#include <stddef.h>

#define FIG_MAX_SERIES 48 /* series per figure (the legend's colours) */
#define FIG_MAX_CATS 16   /* categories of a bar cell */
#define FIG_NAME 512      /* a series name: labels and variant; longer ones would merge */

/* An axis unit: values are divided by div and labelled name ("" when unitless). */
typedef struct fig_unit {
    double div;
    const char *name;
} fig_unit;

/* The unit in which the largest value max reads best. kind: 's' seconds (us … d), 'B' bytes
 * (B … TB, powers of 1000), anything else none. */
fig_unit fig_unit_pick(int kind, double max);

/* A point of a line cell: its series (name and colour index) and its value. */
typedef struct fig_point {
    int series; /* colour index */
    char name[FIG_NAME];
    double x, y;
} fig_point;

/* A cell of lines: its data file (one block per series), title, y label (with the unit),
 * the series' colour indices (lt, nb of them), whether y is log, and the x values' range. */
typedef struct fig_cell {
    char file[PATH_MAX + 256];
    char title[300], ylabel[64];
    int nb, lt[FIG_MAX_SERIES], ylog;
    double xmin, xmax;
} fig_cell;

/* The x axis shared by n cells: 0 linear, else the log base (net_axis: 10, else 2) when the
 * cells' x values are positive and span a factor of 4 or more. */
int fig_xlog(const fig_cell *cl, int n, int net_axis);
/* The x range drawn for a cell: padded (5 %, or ×1.25 on a log axis), and a range around a
 * single x value (or [1, 1] for an empty cell), which gnuplot would draw as an empty axis. */
void fig_cell_xrange(const fig_cell *c, int xlog, double *lo, double *hi);

/* A cell of horizontal stacked bars: a bar per label, a stack of categories per bar. */
typedef struct fig_bars {
    char label[FIG_MAX_SERIES][FIG_NAME];
    char cat[FIG_MAX_CATS][32];
    double v[FIG_MAX_SERIES][FIG_MAX_CATS];
    int nl, nc;
} fig_bars;

/* The index of s among the *n names (stride bytes apart), appended when new; -1 when new and
 * *n == max. */
int fig_name_index(char *names, size_t stride, int *n, int max, const char *s);
/* Categories of b ordered as in a; those zero everywhere in both are dropped, so both cells
 * share categories and colours. */
void fig_bars_align(fig_bars *a, fig_bars *b);

#endif

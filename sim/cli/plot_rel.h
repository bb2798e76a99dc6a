/* plot_rel.h — the faceted figures of `mpcsim plot` (--figure budget|cost|pareto, --y): see
 * plot_rel.c and sim/figure/relplot.h. */
#ifndef MPCSIM_PLOT_REL_H
#define MPCSIM_PLOT_REL_H

#include <sqlite3.h>

#include "sim/figure/barplot.h"
#include "sim/figure/relplot.h"

typedef struct plot_rel_args {
    sqlite3 *h;
    const char *where;     /* " AND …" from --where, or "" */
    const char *figure;    /* budget, cost, pareto, or NULL with y */
    const char *y;         /* comma-separated metrics (with no figure) */
    const char *x;         /* NULL: the figure's own (kept_frac, bytes_decode_step) */
    const char *row, *col; /* facet keys, NULL: what varies */
    const char *metric;    /* the accuracy metric of budget and pareto (NULL: the first held) */
    const char *subtitle;  /* what every run shares */
    const char *tmp, *outdir, *term, *ext;
    const char *name; /* the file's name (no extension), NULL: the figure's own */
} plot_rel_args;

/* Draws the figure into outdir/<name>.<ext> (name: accuracy-budget, cost-budget, pareto-step,
 * or <y>-vs-<x>) and prints its path. 0, 1 (database or gnuplot failure) or 2 (bad usage,
 * nothing to plot), after the error. */
int plot_rel(const plot_rel_args *a);

/* Where a figure goes: the scripts' folder (kept: keep), the output folder, gnuplot's terminal
 * and the file extension. */
typedef struct plot_dest {
    const char *tmp, *outdir, *term, *ext;
    int keep;
} plot_dest;

/* Draws the relplot R (or else the barplot B) into outdir/<name>.<ext> by a script
 * tmp/<name>.gp and prints the file's path. 0, or 1 after the error (gnuplot's messages). */
int plot_draw(const plot_dest *d, const char *name, const relplot *R, const barplot *B);

#endif

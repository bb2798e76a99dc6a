/* plot_int.h — what cmd_plot.c (options, axes, panel and series expressions) and plot_std.c
 * (the standard plots) share; private to `mpcsim plot`. */
#ifndef MPCSIM_PLOT_INT_H
#define MPCSIM_PLOT_INT_H

#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>

#include "dbvar.h"
#include "sim/figure/barplot.h"
#include "sim/figure/relplot.h"

#define PLOT_MAX_PANELS RP_MAX_FACETS

typedef struct plot_ctx {
    sqlite3 *h;
    char tmp[PATH_MAX]; /* folder of the figures' gnuplot scripts */
    int keep;           /* --data DIR: tmp is the user's and kept */
    char outdir[PATH_MAX];
    const char *term; /* pngcairo | png | svg | pdfcairo */
    const char *ext;
    char *where;      /* " AND …" from --where */
    const char *xcol; /* runs column of the x axis */
    const char *xlabel;
    char panel[768];      /* SQL expression naming a run's panel */
    char series[768];     /* SQL expression naming a run's series */
    char serieskeys[256]; /* what the series expression is made of, for the legend title */
    dbvar *var;           /* config keys that tell apart runs the series would merge */
    char title[256];      /* what every plot shares: machine profile, threads */
    const char *metric;   /* --metric */
    const char *name;     /* --name: the file name of the one figure drawn */
    int lat;              /* 0: total and per token, 1: total, 2: decode per token */
    int bd_run;           /* the breakdown of whole runs (else of one decode step) */
    int failed;
} plot_ctx;

/* sql (from sqlite3_mprintf, NULL on OOM; freed here) prepared on the results database;
 * NULL on failure, after the error message when report. */
sqlite3_stmt *plot_stmt(const plot_ctx *c, char *sql, int report);
/* The first column of the first row of an sqlite3_mprintf format's query; -1 on failure. */
int64_t query_int(plot_ctx *c, const char *fmt, ...);
/* x is a network's value (latency_ms, bandwidth_mbps). */
int is_net_axis(const char *x);

/* The standard plots (plot_std.c); a failure counted in c->failed, after its message. */
void plot_latency(plot_ctx *c);
void plot_comm(plot_ctx *c);
void plot_metric(plot_ctx *c);
void plot_breakdown(plot_ctx *c);
void plot_pareto(plot_ctx *c);

#endif

/* cmd_plot.c — `mpcsim plot`: SQL queries → .dat files (values already in the unit the axis
 * shows) and a variable file per plot → the gnuplot scripts in <datadir>/scripts/ → PNG, SVG
 * or PDF.
 *
 * What is drawn where: a panel per model and network (--by), a line (or marker) per policy
 * configuration — policy_label, plus the protocol, model or network when those vary and are
 * not panels — against the axis that varies (--x). Every series keeps one colour in every
 * panel and plot. The figure's data model (cells, units, axis ranges, bar cells) is
 * sim/figure/figure.h; the gnuplot driver is gnuplot.c. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "dbq.h"
#include "dbvar.h"
#include "gnuplot.h"
#include "opt.h"
#include "plot_rel.h"
#include "models/model.h"
#include "protocols/program/op.h"
#include "results/rdb.h"
#include "sim/figure/figure.h"

#define PLOT_MAX_PANELS 16
#define PLOT_MAX_SERIES FIG_MAX_SERIES
#define PLOT_MAX_CATS FIG_MAX_CATS
#define PLOT_MAX_POINTS 4096
#define PLOT_NAME FIG_NAME

typedef fig_unit unit;
typedef fig_point point;
typedef fig_cell cell;
typedef fig_bars bars;

typedef struct plot_ctx {
    sqlite3 *h;
    char tmp[PATH_MAX]; /* folder of the .dat and variable files */
    int keep;           /* --data DIR: tmp is the user's and kept */
    char outdir[PATH_MAX];
    char scripts[PATH_MAX]; /* folder of the .gp scripts */
    const char *term;       /* pngcairo | png | svg | pdfcairo */
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
    int lat;              /* 0: total and per token, 1: total, 2: decode per token */
    int bd_run;           /* the breakdown of whole runs (else of one decode step) */
    char names[PLOT_MAX_SERIES][PLOT_NAME]; /* every series, in colour order */
    int nseries;
    int made, failed;
} plot_ctx;

static void plot_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim plot DB [-o DIR] [--format png|svg|pdf] [--x AXIS] [--by KEYS]\n"
               "                      [--metric NAME] [--latency total|decode-per-token]\n"
               "                      [--where KEY=VALUE]... [--data DIR]\n"
               "       mpcsim plot DB --figure budget|cost|pareto|study | --y METRICS\n"
               "                      [--x AXIS] [--row KEYS] [--col KEYS] [--metric NAME] ...\n\n"
               "Plots the finished runs of a results database with gnuplot:\n"
               "  latency    online latency of the whole run and of decode per generated token\n"
               "  comm       online and offline (preprocessing) bytes\n"
               "  breakdown  per-category time and bytes of one decode step (the mean over the\n"
               "             decode; --breakdown run: the whole run) of each configuration,\n"
               "             stacked, at the largest x of each panel\n"
               "  pareto     accuracy against decode latency per token and against online\n"
               "             bytes, one marker per policy configuration, with the Pareto front\n"
               "             (when the runs have accuracy metrics)\n"
               "  metric-M   --metric M against the x axis\n"
               "With --figure or --y, only a faceted figure: panels in rows and columns\n"
               "(--row, --col), a colour per policy family with a line through its points, a\n"
               "marker per configuration (its budget), one legend under the panels:\n"
               "  accuracy-budget  --figure budget: accuracy against the kept fraction\n"
               "  cost-budget      --figure cost: decode-step latency and bytes against it\n"
               "  pareto-step      --figure pareto: accuracy against decode-step bytes\n"
               "  Y-vs-X           --y Y [--x X]: any metrics against any metric or parameter\n"
               "A panel per model and network; a line per policy configuration (its label holds\n"
               "the parameters that differ from the defaults), with the protocol, model or\n"
               "network added when they vary and are not panels; other differences are averaged.\n"
               "Axes show s/min/h/d and B/kB/MB/GB/TB as the values need. Scripts: scripts/*.gp\n"
               "under the data directory ($MPCSIM_DATA overrides).\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "exit status: 0 ok; 1 gnuplot or database failure; 2 bad usage, no such database,\n"
               "or nothing to plot\n");
}

/* ---- helpers --------------------------------------------------------------------------- */

/* sql (from sqlite3_mprintf, NULL on OOM; freed here) prepared on the results database;
 * NULL on failure, after the error message when report. */
static sqlite3_stmt *plot_stmt(const plot_ctx *c, char *sql, int report)
{
    sqlite3_stmt *s = NULL;
    if (!sql || sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) != SQLITE_OK) {
        if (report)
            cli_error("plot", "%s", sqlite3_errmsg(c->h));
        sqlite3_finalize(s);
        s = NULL;
    }
    sqlite3_free(sql);
    return s;
}

/* The first terminal of the list this gnuplot has; NULL if gnuplot is missing or has none. */
static const char *find_terminal(const char *tmp, const char *const *terms, size_t n)
{
    char probe[PATH_MAX + 16];
    snprintf(probe, sizeof probe, "%s/probe.gp", tmp);
    for (size_t i = 0; i < n; i++) {
        FILE *f = fopen(probe, "w");
        if (!f)
            return NULL;
        fprintf(f, "set terminal %s\n", terms[i]);
        fclose(f);
        const char *files[] = {probe};
        int rc = gnuplot_run(NULL, files, 1, "/dev/null");
        unlink(probe);
        if (rc == 0)
            return terms[i];
    }
    return NULL;
}

/* fmt is an sqlite3_mprintf format (%q, %Q): no printf format attribute. */
static int64_t query_int(plot_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *s;
    int64_t v = -1;
    if (sql && sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_free(sql);
    return v;
}

/* Distinct values of an expression over the plotted runs. */
static int64_t n_distinct(plot_ctx *c, const char *expr)
{
    return query_int(c, "SELECT count(DISTINCT %s) FROM runs r WHERE r.status = 'ok' %s", expr,
                     c->where);
}

/* ---- what the panels, the lines and the x axis are ------------------------------------- */

static const char *const x_axes[] = {"prompt_len", "decode_len", "batch", "latency_ms",
                                     "bandwidth_mbps"};
#define N_X_AXES (sizeof x_axes / sizeof x_axes[0])

static const char *x_label(const char *x)
{
    if (!strcmp(x, "prompt_len"))
        return "prompt length (tokens)";
    if (!strcmp(x, "decode_len"))
        return "generated tokens";
    if (!strcmp(x, "batch"))
        return "sequences per batch";
    if (!strcmp(x, "latency_ms"))
        return "one-way link latency (ms)";
    return "link bandwidth (Mbit/s)";
}

static int is_net_axis(const char *x)
{
    return !strcmp(x, "latency_ms") || !strcmp(x, "bandwidth_mbps");
}

/* A panel or series key → SQL. A network on the x axis is replaced by its other value. */
static const char *key_sql(const char *key, const char *x)
{
    if (!strcmp(key, "model"))
        return "r.model";
    if (!strcmp(key, "protocol")) /* with the options that differ from the defaults */
        return "r.protocol_label";
    if (!strcmp(key, "policy"))
        return "r.policy_label";
    if (!strcmp(key, "machine")) /* the profile and the cores a party uses: 'default 16t' */
        return "(coalesce(r.machine, 'default') || ' ' || coalesce(r.threads, 1) || 't')";
        /* the framing the label ends with (' tcp', ' tls*'), kept when the values are on x */
#define NET_WIRE_SQL                                                                          \
    "(CASE WHEN r.network GLOB '* tcp' OR r.network GLOB '* tls' THEN substr(r.network, -4) " \
    "WHEN r.network GLOB '* tcp[*]' OR r.network GLOB '* tls[*]' THEN substr(r.network, -5) " \
    "ELSE '' END)"
    if (!strcmp(key, "network")) {
        if (!strcmp(x, "latency_ms")) /* the bandwidth: '10 Gbit/s', '100 Mbit/s' */
            return "(CASE WHEN r.bandwidth_mbps >= 1000 THEN printf('%g Gbit/s', "
                   "r.bandwidth_mbps / 1000) ELSE printf('%g Mbit/s', r.bandwidth_mbps) END "
                   "|| " NET_WIRE_SQL ")";
        if (!strcmp(x, "bandwidth_mbps"))
            return "(printf('%gms', r.latency_ms) || " NET_WIRE_SQL ")";
        return "r.network";
    }
#undef NET_WIRE_SQL
    return NULL;
}

/* --x, or the axis that varies most (the prompt length on ties and when none varies).
 * 0, or 2 after the error. */
static int plot_pick_x(plot_ctx *c, const char *xopt)
{
    if (xopt) {
        size_t i = 0;
        while (i < N_X_AXES && strcmp(x_axes[i], xopt))
            i++;
        if (i == N_X_AXES) {
            const char *dym = did_you_mean(xopt, x_axes, N_X_AXES);
            cli_error("plot",
                      "--x wants prompt_len, decode_len, batch, latency_ms or "
                      "bandwidth_mbps, not '%s'%s%s%s",
                      xopt, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
            return 2;
        }
        c->xcol = x_axes[i];
    } else {
        int64_t best = 1;
        c->xcol = "prompt_len";
        for (size_t i = 0; i < N_X_AXES; i++) {
            char e[64];
            snprintf(e, sizeof e, "r.%s", x_axes[i]);
            int64_t n = n_distinct(c, e);
            if (n > best) {
                best = n;
                c->xcol = x_axes[i];
            }
        }
    }
    c->xlabel = x_label(c->xcol);
    return 0;
}

/* What panels and series are made of, in key_sql's names. */
static const char *const plot_keys[] = {"model", "network", "protocol", "policy", "machine"};
enum { KEY_MODEL, KEY_NETWORK, KEY_PROTOCOL, KEY_POLICY, KEY_MACHINE, N_PLOT_KEYS };
_Static_assert(sizeof plot_keys / sizeof plot_keys[0] == N_PLOT_KEYS, "a name per key");

/* --by (default model,network) → in_panel[k] for each key. 0, or 2 after the error. */
static int plot_by(const plot_ctx *c, const char *by, int *in_panel)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", by ? by : "model,network");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < N_PLOT_KEYS && strcmp(plot_keys[k], t))
            k++;
        if (k == N_PLOT_KEYS && strcmp(t, "none")) {
            const char *dym = did_you_mean(t, plot_keys, N_PLOT_KEYS);
            cli_error("plot",
                      "--by takes model, network, protocol, policy, machine or none, not "
                      "'%s'%s%s%s",
                      t, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
            return 2;
        }
        if (k < N_PLOT_KEYS)
            in_panel[k] = 1;
    }
    if (!by && is_net_axis(c->xcol))
        in_panel[KEY_NETWORK] = 0; /* the network varies along x */
    return 0;
}

/* The panel expression from the keys in panels; the series expression and the legend's keys
 * from the policy configuration first, then what else varies outside the panels. */
static void plot_exprs(plot_ctx *c, const int *in_panel)
{
    size_t pl = 0, sl = 0, kl = 0;
    c->panel[0] = c->series[0] = c->serieskeys[0] = '\0';
    for (int k = 0; k < N_PLOT_KEYS; k++) {
        const char *e = key_sql(plot_keys[k], c->xcol);
        if (in_panel[k]) /* named even when it does not vary: the panel's title says what it is */
            pl += (size_t)snprintf(c->panel + pl, sizeof c->panel - pl, "%s%s",
                                   pl ? " || ' · ' || " : "", e);
    }
    static const int order[] = {KEY_POLICY, KEY_PROTOCOL, KEY_MODEL, KEY_NETWORK, KEY_MACHINE};
    for (int i = 0; i < N_PLOT_KEYS; i++) {
        int k = order[i];
        const char *e = key_sql(plot_keys[k], c->xcol);
        if (in_panel[k] || (k != KEY_POLICY && n_distinct(c, e) < 2))
            continue;
        sl += (size_t)snprintf(c->series + sl, sizeof c->series - sl, "%s%s",
                               sl ? " || ' ' || " : "", e);
        kl +=
            (size_t)snprintf(c->serieskeys + kl, sizeof c->serieskeys - kl, "%s%s", kl ? ", " : "",
                             k == KEY_NETWORK && is_net_axis(c->xcol)
                                 ? (!strcmp(c->xcol, "latency_ms") ? "bandwidth" : "latency")
                                 : plot_keys[k]);
    }
    if (!c->panel[0])
        snprintf(c->panel, sizeof c->panel, "'all runs'");
}

/* Runs the panels, the series and x still merge (another trace seed, batch, a model's own
 * dimensions, …): their differing config keys join the series (run_variant). 0, or 1 after
 * the error. */
static int plot_variants(plot_ctx *c)
{
    char ident[2200], family[2048];
    snprintf(family, sizeof family, "%s || char(31) || %s", c->panel,
             c->series[0] ? c->series : "''");
    snprintf(ident, sizeof ident, "%s || char(31) || r.%s", family, c->xcol);
    if (dbvar_build(c->h, ident, family, c->where, DBVAR_OK_ONLY, &c->var) ||
        dbvar_sql(c->h, c->var)) {
        cli_error("plot", "reading the runs' configurations: %s", sqlite3_errmsg(c->h));
        return 1;
    }
    size_t sl = strlen(c->series), kl = strlen(c->serieskeys);
    if (dbvar_keys(c->var)[0]) { /* only the runs that have one: the others keep their name */
        snprintf(c->series + sl, sizeof c->series - sl, "%s",
                 sl ? " || (CASE run_variant(r.id) WHEN '' THEN '' ELSE ' ' || "
                      "run_variant(r.id) END)"
                    : "coalesce(nullif(run_variant(r.id), ''), 'all runs')");
        snprintf(c->serieskeys + kl, sizeof c->serieskeys - kl, "%s%s", kl ? ", " : "",
                 dbvar_keys(c->var));
    }
    if (!c->series[0])
        snprintf(c->series, sizeof c->series, "'all runs'");
    return 0;
}

/* What every run shares, shown in every title: the machine profile and its threads. */
static void plot_title(plot_ctx *c)
{
    sqlite3_stmt *s = plot_stmt(
        c,
        sqlite3_mprintf(
            "SELECT group_concat(m, '; ') FROM (SELECT DISTINCT coalesce(r.machine, 'default') || "
            "', ' || coalesce(r.threads, 1) || ' thread' || CASE WHEN coalesce(r.threads, 1) = 1 "
            "THEN '' ELSE 's' END AS m FROM runs r WHERE r.status = 'ok' %s)",
            c->where),
        0);
    c->title[0] = '\0';
    if (s && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
        snprintf(c->title, sizeof c->title, "machine %s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
}

/* Every series, in the order of their colours. */
static void plot_series_names(plot_ctx *c)
{
    sqlite3_stmt *s = plot_stmt(c,
                                sqlite3_mprintf("SELECT DISTINCT %s AS s FROM runs r WHERE "
                                                "r.status = 'ok' %s ORDER BY s",
                                                c->series, c->where),
                                0);
    c->nseries = 0;
    while (s && sqlite3_step(s) == SQLITE_ROW && c->nseries < PLOT_MAX_SERIES)
        snprintf(c->names[c->nseries++], sizeof c->names[0], "%s",
                 (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
}

/* The x axis, the panel and series expressions (panels from --by, series from what else
 * varies), the shared title and the series' colours. 0, or the exit status after the error. */
static int plot_axes(plot_ctx *c, const char *xopt, const char *by)
{
    int in_panel[N_PLOT_KEYS] = {0}, st;
    if ((st = plot_pick_x(c, xopt)) || (st = plot_by(c, by, in_panel)))
        return st;
    plot_exprs(c, in_panel);
    if ((st = plot_variants(c)))
        return st;
    plot_title(c);
    plot_series_names(c);
    return 0;
}

static int series_colour(const plot_ctx *c, const char *name)
{
    for (int i = 0; i < c->nseries; i++)
        if (!strcmp(c->names[i], name))
            return i + 1;
    return c->nseries + 1;
}

/* The panels (values of the panel expression) of runs for which `need` (an SQL condition) holds. */
typedef struct panels {
    char name[PLOT_MAX_PANELS][160];
    char title[PLOT_MAX_PANELS][240];
    int n;
} panels;

static int get_panels(plot_ctx *c, const char *need, panels *p)
{
    /* a panel's title: its name, with the values of a preset network it names */
    char *sql = sqlite3_mprintf(
        "SELECT %s AS p, group_concat(DISTINCT CASE WHEN r.network GLOB '*[0-9]*' THEN NULL "
        "ELSE printf('%%g ms', r.latency_ms) || ', ' || CASE WHEN "
        "r.bandwidth_mbps >= 1000 THEN printf('%%g Gbit/s', r.bandwidth_mbps / 1000) ELSE "
        "printf('%%g Mbit/s', r.bandwidth_mbps) END END) FROM runs r WHERE r.status = 'ok' %s "
        "AND (%s) GROUP BY p ORDER BY min(r.model), min(r.latency_ms), -max(r.bandwidth_mbps), p",
        c->panel, c->where, need);
    p->n = 0;
    sqlite3_stmt *s = plot_stmt(c, sql, 1);
    if (!s)
        return -1;
    while (sqlite3_step(s) == SQLITE_ROW && p->n < PLOT_MAX_PANELS) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        const char *nets = (const char *)sqlite3_column_text(s, 1);
        snprintf(p->name[p->n], sizeof p->name[0], "%s", name);
        if (nets && strchr(c->panel, 'n') && strstr(c->panel, "r.network"))
            snprintf(p->title[p->n], sizeof p->title[0], "%s (%s)", name, nets);
        else
            snprintf(p->title[p->n], sizeof p->title[0], "%s", name);
        p->n++;
    }
    sqlite3_finalize(s);
    if (query_int(c, "SELECT count(DISTINCT %s) FROM runs r WHERE r.status = 'ok' %s AND (%s)",
                  c->panel, c->where, need) > PLOT_MAX_PANELS)
        fprintf(stderr,
                "mpcsim plot: warning: more than %d panels; the first %d are drawn "
                "(narrow with --where, or --by fewer keys)\n",
                PLOT_MAX_PANELS, PLOT_MAX_PANELS);
    return 0;
}

/* ---- one panel of lines: (series, x, y) → blocks in the axis' unit ---------------------- */

/* Before point i of pts (sorted by series): when it starts a series, the series' block head
 * (after a blank line pair), its name and the column names; its colour noted in the cell. */
static void cell_block(FILE *f, cell *out, const point *pts, int i, const char *columns)
{
    if (i && !strcmp(pts[i].name, pts[i - 1].name))
        return;
    if (out->nb < PLOT_MAX_SERIES)
        out->lt[out->nb] = pts[i].series;
    fprintf(f, "%s", out->nb++ ? "\n\n" : "");
    gnuplot_str(f, pts[i].name);
    fprintf(f, " %s\n", columns);
}

/* A point from a query's row: (series name, x, y). */
static void point_row(const plot_ctx *c, sqlite3_stmt *s, point *p)
{
    snprintf(p->name, sizeof p->name, "%s", (const char *)sqlite3_column_text(s, 0));
    p->series = series_colour(c, p->name);
    p->x = sqlite3_column_double(s, 1);
    p->y = sqlite3_column_double(s, 2);
}

/* Writes the series of one panel for the per-run value `ysql` (kind 's', 'B' or 0) into
 * c->tmp/<file>; fills the cell (blocks, colours, unit, x range). 0 with nb = 0 when the panel
 * has no such value. */
static int write_cell(plot_ctx *c, const char *panel, const char *ysql, int kind, const char *what,
                      const char *file, cell *out)
{
    static point pts[PLOT_MAX_POINTS];
    char *sql = sqlite3_mprintf("SELECT %s AS s, r.%s AS x, avg(%s) AS y FROM runs r WHERE "
                                "r.status = 'ok' %s AND (%s) = ?1 AND (%s) IS NOT NULL GROUP BY "
                                "s, x ORDER BY s, x",
                                c->series, c->xcol, ysql, c->where, c->panel, ysql);
    sqlite3_stmt *s = plot_stmt(c, sql, 1);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, panel, -1, SQLITE_STATIC);
    int n = 0;
    double max = 0, ymin = INFINITY;
    memset(out, 0, sizeof *out);
    out->xmin = INFINITY;
    out->xmax = -INFINITY;
    while (sqlite3_step(s) == SQLITE_ROW && n < PLOT_MAX_POINTS) {
        point *p = &pts[n++];
        point_row(c, s, p);
        max = fmax(max, p->y);
        ymin = fmin(ymin, p->y);
        out->xmin = fmin(out->xmin, p->x);
        out->xmax = fmax(out->xmax, p->x);
    }
    sqlite3_finalize(s);
    unit u = fig_unit_pick(kind, max);
    snprintf(out->file, sizeof out->file, "%s/%s", c->tmp, file);
    snprintf(out->ylabel, sizeof out->ylabel, "%s%s%s%s", what, u.name[0] ? " (" : "", u.name,
             u.name[0] ? ")" : "");
    out->ylog = ymin > 0 && max / ymin >= 30;
    FILE *f = fopen(out->file, "w");
    if (!f) {
        cli_error("plot", "cannot write %s: %s", out->file, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        cell_block(f, out, pts, i, "x y");
        fprintf(f, "%.9g %.9g\n", pts[i].x, pts[i].y / u.div);
    }
    return fclose(f) ? -1 : 0;
}

/* Opens a plot's variable file with the variables every script reads. */
static FILE *vars_open(plot_ctx *c, const char *plot, const char *heading, char *path, size_t n)
{
    snprintf(path, n, "%s/vars_%s.gp", c->tmp, plot);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    char out[PATH_MAX + 64];
    snprintf(out, sizeof out, "%s/%s.%s", c->outdir, plot, c->ext);
    gnuplot_var_line(f, "term_name", c->term);
    gnuplot_var_line(f, "outfile", out);
    gnuplot_var_line(f, "datadir", c->tmp);
    gnuplot_var_line(f, "scriptdir", c->scripts);
    gnuplot_var_line(f, "xlabel_text", c->xlabel);
    gnuplot_var_line(f, "subtitle", c->title);
    gnuplot_var_line(f, "heading", heading);
    gnuplot_var_line(f, "serieskeys", c->serieskeys);
    fprintf(f, "nseries = %d\n", c->nseries);
    return f;
}

/* The cells of a grid of line panels: rows × cols, cell i (1-based, row-major). */
static void vars_cells(FILE *v, const plot_ctx *c, const cell *cl, int n, int rows, int cols)
{
    fprintf(v, "nrows = %d\nncols = %d\nncells = %d\n", rows, cols, n);
    int xlog = fig_xlog(cl, n, is_net_axis(c->xcol));
    fprintf(v, "xlog = %d\n", xlog);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "file%d", i + 1);
        gnuplot_var_line(v, name, cl[i].file);
        snprintf(name, sizeof name, "title%d", i + 1);
        gnuplot_var_line(v, name, cl[i].title);
        snprintf(name, sizeof name, "ylabel%d", i + 1);
        gnuplot_var_line(v, name, cl[i].ylabel);
        double a, b;
        fig_cell_xrange(&cl[i], xlog, &a, &b);
        fprintf(v, "nb%d = %d\nylog%d = %d\nxmin%d = %.9g\nxmax%d = %.9g\n", i + 1, cl[i].nb, i + 1,
                cl[i].ylog, i + 1, a, i + 1, b);
        for (int b2 = 0; b2 < cl[i].nb && b2 < PLOT_MAX_SERIES; b2++)
            fprintf(v, "lt%d_%d = %d\n", i + 1, b2, cl[i].lt[b2]);
    }
}

/* Closes the variable file and runs the plot's script after it. */
static void plot_render(plot_ctx *c, const char *plot, const char *script_name, FILE *vars,
                        const char *vars_path)
{
    char script[PATH_MAX + 64];
    snprintf(script, sizeof script, "%s/%s.gp", c->scripts, script_name);
    if (fclose(vars)) {
        cli_error("plot", "%s: cannot write: %s", vars_path, strerror(errno));
        c->failed++;
        return;
    }
    const char *files[] = {vars_path, script};
    /* gnuplot's warnings are noise on success; on failure the whole log goes to stderr */
    char errlog[PATH_MAX + 32];
    snprintf(errlog, sizeof errlog, "%s/%s.log", c->tmp, plot);
    if (gnuplot_run(NULL, files, 2, errlog)) {
        cli_error("plot", "gnuplot failed on %s:", script);
        FILE *f = fopen(errlog, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
        c->failed++;
        return;
    }
    if (!c->keep)
        unlink(errlog);
    printf("%s/%s.%s\n", c->outdir, plot, c->ext);
    c->made++;
}

/* ---- the per-run values ---------------------------------------------------------------- */

#define Y_TOTAL "((SELECT sum(latency_ns) FROM phases p WHERE p.run_id = r.id) / 1e9)"
#define Y_TOKEN                                                                                \
    "((SELECT latency_ns FROM phases p WHERE p.run_id = r.id AND p.phase = 'decode') / 1e9 / " \
    "nullif(r.decode_len, 0))"
#define Y_ONLINE                                                                              \
    "(SELECT sum(bytes_p0 + bytes_p1 + bytes_p2) FROM breakdown b WHERE b.run_id = r.id AND " \
    "b.category = 'total')"
#define Y_OFFLINE                                                                          \
    "(SELECT nullif(sum(offline_p0 + offline_p1 + offline_p2), 0) FROM breakdown b WHERE " \
    "b.run_id = r.id AND b.category = 'total')"

/* Rows of line panels, one column per value: e.g. total latency | per token. */
static void plot_lines(plot_ctx *c, const char *plot, const char *heading, const char *const *ysql,
                       const int *kind, const char *const *what, int nv, const char *need)
{
    panels P;
    static cell cl[PLOT_MAX_PANELS * 2];
    if (get_panels(c, need, &P))
        return (void)c->failed++;
    if (P.n == 0)
        return;
    int n = 0;
    for (int p = 0; p < P.n; p++)
        for (int k = 0; k < nv; k++, n++) {
            char file[96];
            snprintf(file, sizeof file, "%s_%d_%d.dat", plot, p + 1, k + 1);
            if (write_cell(c, P.name[p], ysql[k], kind[k], what[k], file, &cl[n]))
                return (void)c->failed++;
            snprintf(cl[n].title, sizeof cl[n].title, "%s — %s", P.title[p], what[k]);
        }
    char vpath[PATH_MAX + 32];
    FILE *v = vars_open(c, plot, heading, vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    vars_cells(v, c, cl, n, P.n, nv);
    plot_render(c, plot, "lines", v, vpath);
}

static void plot_latency(plot_ctx *c)
{
    const char *ys[2] = {Y_TOTAL, Y_TOKEN}, *what[2] = {"whole run", "decode, per token"};
    int kind[2] = {'s', 's'};
    int first = c->lat == 2, nv = c->lat ? 1 : 2;
    plot_lines(c, "latency", "Online latency", ys + first, kind, what + first, nv, "1");
}

static void plot_comm(plot_ctx *c)
{
    const char *ys[2] = {Y_ONLINE, Y_OFFLINE}, *what[2] = {"online bytes", "offline bytes"};
    int kind[2] = {'B', 'B'};
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs r WHERE r.status = 'ok' %%s AND %s > 0",
             Y_OFFLINE);
    int off = query_int(c, sql, c->where) > 0;
    plot_lines(c, "comm", "Communication", ys, kind, what, off ? 2 : 1, "1");
}

static int metric_unit(plot_ctx *c, const char *name, char *unit_out, size_t n)
{
    sqlite3_stmt *s;
    int found = 0;
    if (sqlite3_prepare_v2(c->h, "SELECT unit FROM metrics WHERE name = ?1 LIMIT 1", -1, &s,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW) {
            found = 1;
            snprintf(unit_out, n, "%s", (const char *)sqlite3_column_text(s, 0));
        }
        sqlite3_finalize(s);
    }
    return found;
}

static void plot_metric(plot_ctx *c)
{
    char unit_name[32] = "", ysql[256], plot[96];
    metric_unit(c, c->metric, unit_name, sizeof unit_name);
    char *q = sqlite3_mprintf("(SELECT value FROM metrics m WHERE m.run_id = r.id AND m.name = "
                              "%Q)",
                              c->metric);
    snprintf(ysql, sizeof ysql, "%s", q ? q : "NULL");
    sqlite3_free(q);
    const char *ys[1] = {ysql}, *what[1] = {c->metric};
    int kind[1] = {!strcmp(unit_name, "s") ? 's' : !strcmp(unit_name, "B") ? 'B' : 0};
    snprintf(plot, sizeof plot, "metric-%s", c->metric);
    plot_lines(c, plot, c->metric, ys, kind, what, 1, "1");
}

/* ---- breakdown: horizontal stacked bars, one per series, at each panel's largest x ------- */

static int bars_fill(plot_ctx *c, const char *panel, const char *figure, double x, bars *b)
{
    char *sql = sqlite3_mprintf(
        "SELECT s, category, avg(v) FROM (SELECT %s AS s, b.category AS category, sum(%s) %s AS "
        "v, min(b.rowid) AS ord FROM runs r JOIN breakdown b ON b.run_id = r.id WHERE r.status = "
        "'ok' %s AND b.category <> 'total' AND (%s) = ?1 AND r.%s = ?2 %s GROUP BY r.id, "
        "b.category) GROUP BY s, category ORDER BY s, min(ord)",
        c->series, figure, c->bd_run ? "" : "/ max(r.decode_len, 1)", c->where, c->panel, c->xcol,
        c->bd_run ? "" : "AND b.phase = 'decode' AND r.decode_len > 0");
    sqlite3_stmt *s = plot_stmt(c, sql, 0);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, panel, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 2, x);
    memset(b, 0, sizeof *b);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int l = fig_name_index(&b->label[0][0], sizeof b->label[0], &b->nl, PLOT_MAX_SERIES,
                               (const char *)sqlite3_column_text(s, 0));
        int k = fig_name_index(&b->cat[0][0], sizeof b->cat[0], &b->nc, PLOT_MAX_CATS,
                               (const char *)sqlite3_column_text(s, 1));
        if (l >= 0 && k >= 0)
            b->v[l][k] = sqlite3_column_double(s, 2);
    }
    sqlite3_finalize(s);
    return 0;
}

/* One block per category: bar index, start, end (stacked), in the unit of the largest bar;
 * base: the stored unit in seconds or bytes (1e-9 for ns). Each block is headed by the
 * category's name and its colour (its place among every op category). */
static int bars_write(const bars *b, int kind, double base, const char *path, unit *u)
{
    double max = 0;
    for (int l = 0; l < b->nl; l++) {
        double sum = 0;
        for (int k = 0; k < b->nc; k++)
            sum += b->v[l][k];
        max = fmax(max, sum * base);
    }
    *u = fig_unit_pick(kind, max);
    double div = u->div / base;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int k = 0; k < b->nc; k++) {
        fprintf(f, "%s", k ? "\n\n" : "");
        gnuplot_str(f, b->cat[k]);
        fprintf(f, " bar start end\n");
        for (int l = 0; l < b->nl; l++) {
            double start = 0;
            for (int j = 0; j < k; j++)
                start += b->v[l][j];
            fprintf(f, "%d %.9g %.9g\n", l, start / div, (start + b->v[l][k]) / div);
        }
    }
    return fclose(f);
}

/* The largest x among a panel's runs: where its breakdown is taken. */
static double panel_max_x(plot_ctx *c, const char *panel)
{
    sqlite3_stmt *s = plot_stmt(c,
                                sqlite3_mprintf("SELECT max(r.%s) FROM runs r WHERE "
                                                "r.status = 'ok' %s AND (%s) = ?1",
                                                c->xcol, c->where, c->panel),
                                0);
    double x = 0;
    if (!s)
        return x;
    sqlite3_bind_text(s, 1, panel, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        x = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    return x;
}

/* A breakdown panel's title: the panel's, and where on x it stands ("prompt 2048"). */
static void breakdown_title(const plot_ctx *c, const char *panel_title, double x, char *out,
                            size_t n)
{
    static const char *const at[][2] = {{"prompt_len", "prompt %g"},
                                        {"decode_len", "%g generated"},
                                        {"batch", "batch %g"},
                                        {"latency_ms", "%g ms latency"},
                                        {"bandwidth_mbps", "%g Mbit/s"}};
    const char *fmt = "%g";
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        if (!strcmp(at[i][0], c->xcol))
            fmt = at[i][1];
    char xs[64];
    snprintf(xs, sizeof xs, fmt, x);
    snprintf(out, n, "%s, %s", panel_title, xs);
}

/* Panel p's variables: its title, the units, the bars' labels, the categories and their
 * colours (a category's place in the op category list). */
static void breakdown_vars(FILE *v, int p, const char *title, const bars *t, const unit *ut,
                           const unit *ub)
{
    char name[48];
    snprintf(name, sizeof name, "ptitle%d", p + 1);
    gnuplot_var_line(v, name, title);
    snprintf(name, sizeof name, "tunit%d", p + 1);
    gnuplot_var_line(v, name, ut->name);
    snprintf(name, sizeof name, "bunit%d", p + 1);
    gnuplot_var_line(v, name, ub->name);
    fprintf(v, "nbars%d = %d\nncats%d = %d\n", p + 1, t->nl, p + 1, t->nc);
    for (int l = 0; l < t->nl; l++) {
        snprintf(name, sizeof name, "bar%d_%d", p + 1, l);
        gnuplot_var_line(v, name, t->label[l]);
    }
    for (int k = 0; k < t->nc; k++) {
        snprintf(name, sizeof name, "cat%d_%d", p + 1, k);
        gnuplot_var_line(v, name, t->cat[k]);
        int lt = 0;
        while (lt < OPC_N && strcmp(op_cat_name(lt), t->cat[k]))
            lt++;
        fprintf(v, "catlt%d_%d = %d\n", p + 1, k, lt + 1);
    }
}

/* Panel p of P: the time and the bytes bars at its largest x, their data files and its
 * variables in v. The bars' count, or -1. */
static int breakdown_panel(plot_ctx *c, FILE *v, const panels *P, int p)
{
    static bars t, by;
    double x = panel_max_x(c, P->name[p]);
    if (bars_fill(c, P->name[p], "b.compute_ns + b.comm_ns", x, &t) ||
        bars_fill(c, P->name[p], "b.bytes_p0 + b.bytes_p1 + b.bytes_p2", x, &by))
        return -1;
    fig_bars_align(&t, &by);
    unit ut, ub;
    char path[PATH_MAX + 64], title[400];
    snprintf(path, sizeof path, "%s/bd_time_%d.dat", c->tmp, p + 1);
    int rc = bars_write(&t, 's', 1e-9, path, &ut);
    snprintf(path, sizeof path, "%s/bd_bytes_%d.dat", c->tmp, p + 1);
    rc |= bars_write(&by, 'B', 1, path, &ub);
    if (rc)
        return -1;
    breakdown_title(c, P->title[p], x, title, sizeof title);
    breakdown_vars(v, p, title, &t, &ut, &ub);
    return t.nl;
}

static void plot_breakdown(plot_ctx *c)
{
    panels P;
    if (get_panels(c, "1", &P))
        return (void)c->failed++;
    if (P.n == 0)
        return;
    char vpath[PATH_MAX + 32];
    FILE *v =
        vars_open(c, "breakdown",
                  c->bd_run ? "Per-category breakdown of the whole run"
                            : "Per-category breakdown of one decode step (mean over the decode)",
                  vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    fprintf(v, "npanels = %d\n", P.n);
    int maxbars = 1;
    for (int p = 0; p < P.n; p++) {
        int nb = breakdown_panel(c, v, &P, p);
        if (nb < 0) {
            fclose(v);
            return (void)c->failed++;
        }
        maxbars = nb > maxbars ? nb : maxbars;
    }
    fprintf(v, "maxbars = %d\n", maxbars);
    plot_render(c, "breakdown", "breakdown", v, vpath);
}

/* ---- Pareto: accuracy against decode latency per token and against online bytes --------- */

/* The accuracy metric to plot: a preferred one if present, else the first accuracy metric. */
static int pareto_metric(plot_ctx *c, char *out, size_t n)
{
    static const char *const pref[] = {"attn_mass_recall", "mass_recall", "top1_agreement",
                                       "topk_recall",      "logit_kl",    "attn_out_rel_err"};
    char names[64][48];
    int nn = 0;
    char *sql = sqlite3_mprintf("SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = "
                                "m.run_id WHERE r.status = 'ok' %s ORDER BY m.name",
                                c->where);
    sqlite3_stmt *s = plot_stmt(c, sql, 0);
    if (!s)
        return 0;
    while (sqlite3_step(s) == SQLITE_ROW && nn < 64)
        snprintf(names[nn++], 48, "%.47s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    for (size_t p = 0; p < sizeof pref / sizeof pref[0]; p++)
        for (int i = 0; i < nn; i++)
            if (!strcmp(names[i], pref[p]))
                return snprintf(out, n, "%s", names[i]) > 0;
    for (int i = 0; i < nn; i++)
        if (rdb_metric_is_accuracy(names[i]))
            return snprintf(out, n, "%s", names[i]) > 0;
    return 0;
}

/* The front over the panel's n points (reordered): sorted by cost, each point better than
 * every cheaper one, the cost divided by div, into path. */
static int pareto_front(point *pts, int n, int lower, double div, const char *path)
{
    for (int i = 1; i < n; i++) /* insertion sort by cost, then accuracy best first */
        for (int j = i; j > 0; j--) {
            point *a = &pts[j - 1], *b = &pts[j];
            int swap = b->x < a->x || (b->x == a->x && (lower ? b->y < a->y : b->y > a->y));
            if (!swap)
                break;
            point t = *a;
            *a = *b;
            *b = t;
        }
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double best = 0;
    for (int i = 0; i < n; i++)
        if (!i || (lower ? pts[i].y < best : pts[i].y > best)) {
            fprintf(f, "%.9g %.9g\n", pts[i].x / div, pts[i].y);
            best = pts[i].y;
        }
    return fclose(f);
}

/* One panel: a block per series of (cost, accuracy) points, and the front. */
static int pareto_cell(plot_ctx *c, const char *panel, const char *metric, int lower,
                       const char *cost, int kind, const char *file, const char *front, cell *out)
{
    static point pts[PLOT_MAX_POINTS];
    char *sql = sqlite3_mprintf(
        "SELECT %s AS s, avg(%s) AS cost, avg(m.value) AS acc FROM runs r JOIN metrics m ON "
        "m.run_id = r.id AND m.name = ?2 WHERE r.status = 'ok' %s AND (%s) = ?1 AND (%s) IS NOT "
        "NULL GROUP BY s, r.%s ORDER BY s, cost",
        c->series, cost, c->where, c->panel, cost, c->xcol);
    sqlite3_stmt *s = plot_stmt(c, sql, 1);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, panel, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, metric, -1, SQLITE_STATIC);
    int n = 0;
    double max = 0;
    memset(out, 0, sizeof *out);
    while (sqlite3_step(s) == SQLITE_ROW && n < PLOT_MAX_POINTS) {
        point *p = &pts[n++];
        point_row(c, s, p);
        max = fmax(max, p->x);
    }
    sqlite3_finalize(s);
    unit u = fig_unit_pick(kind, max);
    snprintf(out->file, sizeof out->file, "%s/%s", c->tmp, file);
    snprintf(out->ylabel, sizeof out->ylabel, "%s (%s)",
             kind == 's' ? (c->lat == 1 ? "latency, whole run" : "decode latency per token")
                         : "online bytes",
             u.name);
    FILE *f = fopen(out->file, "w");
    if (!f)
        return -1;
    out->xmin = INFINITY;
    out->xmax = -INFINITY;
    for (int i = 0; i < n; i++) {
        cell_block(f, out, pts, i, "cost accuracy");
        fprintf(f, "%.9g %.9g\n", pts[i].x / u.div, pts[i].y);
        out->xmin = fmin(out->xmin, pts[i].x / u.div);
        out->xmax = fmax(out->xmax, pts[i].x / u.div);
    }
    if (fclose(f))
        return -1;
    char fpath[PATH_MAX + 64];
    snprintf(fpath, sizeof fpath, "%s/%s", c->tmp, front);
    return pareto_front(pts, n, lower, u.div, fpath);
}

static void plot_pareto(plot_ctx *c)
{
    char metric[48];
    if (!pareto_metric(c, metric, sizeof metric)) {
        printf("note: no accuracy metrics in these runs; skipping the Pareto plot\n");
        return;
    }
    char need[256];
    snprintf(need, sizeof need,
             "EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.id AND "
             "m.name = '%s')",
             metric);
    panels P;
    static cell cl[PLOT_MAX_PANELS * 2];
    if (get_panels(c, need, &P))
        return (void)c->failed++;
    int lower = rdb_metric_lower_is_better(metric), n = 0;
    for (int p = 0; p < P.n; p++)
        for (int k = 0; k < 2; k++, n++) {
            char file[64], front[64];
            snprintf(file, sizeof file, "pareto_%d_%d.dat", p + 1, k + 1);
            snprintf(front, sizeof front, "front_%d_%d.dat", p + 1, k + 1);
            if (pareto_cell(c, P.name[p], metric, lower,
                            k             ? Y_ONLINE
                            : c->lat == 1 ? Y_TOTAL
                                          : Y_TOKEN,
                            k ? 'B' : 's', file, front, &cl[n]))
                return (void)c->failed++;
            snprintf(cl[n].title, sizeof cl[n].title, "%s", P.title[p]);
        }
    char vpath[PATH_MAX + 32];
    char heading[128];
    snprintf(heading, sizeof heading, "%s against cost (%s is better)", metric,
             lower ? "lower" : "higher");
    FILE *v = vars_open(c, "pareto", heading, vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    vars_cells(v, c, cl, n, P.n, 2);
    for (int i = 0; i < n; i++) { /* the x axis is the cost: its own label per cell */
        char name[32];
        snprintf(name, sizeof name, "xlabel%d", i + 1);
        gnuplot_var_line(v, name, cl[i].ylabel);
        fprintf(v, "xlogci%d = %d\n", i + 1, cl[i].xmin > 0 && cl[i].xmax / cl[i].xmin >= 30);
    }
    gnuplot_var_line(v, "metric_name", metric);
    gnuplot_var_line(v, "better", lower ? "lower" : "higher");
    plot_render(c, "pareto", "pareto", v, vpath);
}

/* ---- the command ----------------------------------------------------------------------- */

/* Removes the temp folder and the files this command wrote in it. */
static void rm_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[PATH_MAX + 300];
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static const char *const formats[] = {"png", "svg", "pdf"}; /* --format's choices, in order */

typedef struct plot_opts {
    const char *db, *out, *x, *by, *metric, *data;
    const char *figure, *y, *row, *col; /* the faceted figures (plot_rel.h) */
    int format;                         /* index into formats */
    int latency;                        /* -1: both rows; 0 total; 1 decode per token */
    int breakdown;                      /* 0 one decode step, 1 the whole run */
    const char *where[DBQ_MAX_WHERE];
    cli_list wl;
} plot_opts;

/* 0 ok, 1 --help printed, 2 usage error (printed). */
static int plot_parse(int argc, char **argv, plot_opts *o)
{
    memset(o, 0, sizeof *o);
    o->latency = -1;
    o->wl = (cli_list){o->where, 0, DBQ_MAX_WHERE};
    int svg = 0;
    const cli_opt opts[] = {
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &o->out,
         .arg = "DIR",
         .help = "output folder (default: DB without .db, plus -plots)"},
        {.name = "format",
         .kind = CLI_CHOICE,
         .dest = &o->format,
         .arg = "F",
         .choices = "png|svg|pdf",
         .help = "png (default), svg or pdf; --svg is --format svg"},
        {.name = "svg", .kind = CLI_FLAG, .dest = &svg, .help = "--format svg"},
        {.name = "x",
         .kind = CLI_STR,
         .dest = &o->x,
         .arg = "AXIS",
         .help = "prompt_len, decode_len, batch, latency_ms or\n"
                 "bandwidth_mbps (default: the one with the most distinct\n"
                 "values); with --figure or --y also any metric (kept_frac:\n"
                 "the budget) or numeric policy parameter"},
        {.name = "figure",
         .kind = CLI_STR,
         .dest = &o->figure,
         .arg = "F",
         .help = "only this figure of an eviction study, faceted: budget\n"
                 "(accuracy against the kept fraction), cost (decode-step\n"
                 "latency and bytes against it), pareto (accuracy against\n"
                 "decode-step bytes, front marked), or study (all three)"},
        {.name = "y",
         .kind = CLI_STR,
         .dest = &o->y,
         .arg = "METRICS",
         .help = "a faceted figure of these metrics (comma-separated;\n"
                 "several become the columns) against --x"},
        {.name = "row",
         .kind = CLI_STR,
         .dest = &o->row,
         .arg = "KEYS",
         .help = "faceted figures: a row of panels per value of these keys\n"
                 "(model, protocol, network, policy, prompt_len,\n"
                 "decode_len, machine; comma-joined, or none; default:\n"
                 "what varies and is not a column)"},
        {.name = "col",
         .kind = CLI_STR,
         .dest = &o->col,
         .arg = "KEYS",
         .help = "faceted figures: a column of panels per value (default:\n"
                 "the protocol and the network, when they vary)"},
        {.name = "by",
         .kind = CLI_STR,
         .dest = &o->by,
         .arg = "KEYS",
         .help = "panels: comma-separated model, network, protocol,\n"
                 "policy, machine, or none (default: model,network;\n"
                 "network is the x axis' when x is latency_ms or\n"
                 "bandwidth_mbps)"},
        {.name = "metric",
         .kind = CLI_STR,
         .dest = &o->metric,
         .arg = "NAME",
         .help = "also plot this metric (a name of the metrics table)"},
        {.name = "latency",
         .kind = CLI_CHOICE,
         .dest = &o->latency,
         .arg = "L",
         .choices = "total|decode-per-token",
         .help = "total or decode-per-token: the latency plot's only row\n"
                 "and the Pareto plot's latency (default: both rows;\n"
                 "Pareto per token)"},
        {.name = "breakdown",
         .kind = CLI_CHOICE,
         .dest = &o->breakdown,
         .arg = "B",
         .choices = "step|run",
         .help = "the breakdown plot of one decode step (default; the mean\n"
                 "over the decode) or of the whole run"},
        {.name = "where",
         .kind = CLI_LIST,
         .dest = &o->wl,
         .arg = "K=V",
         .help = "only runs whose column or config value K is V (as in\n"
                 "`mpcsim report --help`); repeat to narrow further"},
        {.name = "data",
         .kind = CLI_STR,
         .dest = &o->data,
         .arg = "DIR",
         .help = "keep the data and variable files in DIR (to re-plot)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"plot", opts, sizeof opts / sizeof opts[0], 24, 2};
    int rc = cli_parse_one(&cmd, argc, argv, &o->db, "no database given", "one database only",
                           plot_usage);
    if (svg)
        o->format = 1;
    return rc;
}

static int plot_prepare(plot_ctx *c, const plot_opts *o)
{
    snprintf(c->scripts, sizeof c->scripts, "%s/scripts", mpcsim_datadir());
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/lines.gp", c->scripts);
    if (access(probe, R_OK)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        cli_error("plot", "no gnuplot scripts in %s\n  hint: the data folder was looked for in %s",
                  c->scripts, where);
        return 2;
    }
    if (o->out)
        snprintf(c->outdir, sizeof c->outdir, "%s", o->out);
    else {
        size_t n = strlen(o->db);
        int strip = n > 3 && !strcmp(o->db + n - 3, ".db");
        snprintf(c->outdir, sizeof c->outdir, "%.*s-plots", (int)(strip ? n - 3 : n), o->db);
    }
    if (cli_mkdir_p(c->outdir)) {
        cli_error("plot", "cannot create %s: %s", c->outdir, strerror(errno));
        return 1;
    }
    if (o->data) {
        snprintf(c->tmp, sizeof c->tmp, "%s", o->data);
        c->keep = 1;
        if (cli_mkdir_p(c->tmp)) {
            cli_error("plot", "cannot create %s: %s", c->tmp, strerror(errno));
            return 1;
        }
    } else {
        const char *tmpdir = getenv("TMPDIR");
        snprintf(c->tmp, sizeof c->tmp, "%s/mpcsim-plot-XXXXXX",
                 tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (!mkdtemp(c->tmp)) {
            cli_error("plot", "cannot create a temp folder: %s", strerror(errno));
            return 1;
        }
    }
    static const char *const png[] = {"pngcairo", "png"}, *const svg[] = {"svg"},
                             *const pdf[] = {"pdfcairo"};
    if (o->format == 1)
        c->term = find_terminal(c->tmp, svg, 1);
    else if (o->format == 2)
        c->term = find_terminal(c->tmp, pdf, 1);
    else
        c->term = find_terminal(c->tmp, png, 2);
    c->ext = formats[o->format];
    if (!c->term) {
        cli_error("plot",
                  "gnuplot with a %s terminal is needed\n---> HINT: apt-get install "
                  "gnuplot-nox (scripts/install-deps.sh)",
                  c->ext);
        return 1;
    }
    c->lat = o->latency + 1; /* 0 both, 1 total, 2 decode per token */
    c->bd_run = o->breakdown == 1;
    c->metric = o->metric;
    return 0;
}

/* --figure / --y: the faceted figures (plot_rel.c). */
static int plot_faceted(plot_ctx *c, const plot_opts *o)
{
    static const char *const figs[] = {"budget", "cost", "pareto", "study"};
    int f = -1;
    for (int i = 0; o->figure && i < 4; i++)
        if (!strcmp(o->figure, figs[i]))
            f = i;
    if (o->figure && f < 0) {
        const char *dym = did_you_mean(o->figure, figs, 4);
        cli_error("plot", "--figure is budget, cost, pareto or study, not '%s'%s%s%s", o->figure,
                  dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
        return 2;
    }
    if (o->figure && o->y) {
        cli_error("plot", "--figure and --y exclude each other (--y draws your own figure)");
        return 2;
    }
    if (o->by) {
        cli_error("plot", "--by is for the standard plots; faceted figures take --row and --col");
        return 2;
    }
    plot_title(c);
    int st = plot_prepare(c, o);
    if (st)
        return st;
    plot_rel_args a = {.h = c->h,
                       .where = c->where,
                       .y = o->y,
                       .x = o->x,
                       .row = o->row,
                       .col = o->col,
                       .metric = o->metric,
                       .subtitle = c->title,
                       .tmp = c->tmp,
                       .outdir = c->outdir,
                       .term = c->term,
                       .ext = c->ext};
    if (f != 3) {
        a.figure = f >= 0 ? figs[f] : NULL;
        return plot_rel(&a);
    }
    for (int i = 0; i < 3 && !st; i++) {
        a.figure = figs[i];
        st = plot_rel(&a);
    }
    return st;
}

int cmd_plot(int argc, char **argv)
{
    plot_opts o;
    int st = plot_parse(argc, argv, &o);
    if (st)
        return st == 1 ? 0 : 2;
    plot_ctx c = {0};
    rdb *db;
    if ((st = dbq_open("plot", o.db, o.where, o.wl.n, &c.where, &db)))
        return st;
    c.h = rdb_handle(db);
    if (query_int(&c, "SELECT count(*) FROM runs r WHERE r.status = 'ok' %s", c.where) < 1) {
        cli_error("plot", "%s holds no finished run to plot%s", o.db,
                  o.wl.n ? " that matches --where" : "");
        rdb_close(db);
        free(c.where);
        return 2;
    }
    if (o.metric && query_int(&c, "SELECT count(*) FROM metrics WHERE name = %Q", o.metric) < 1) {
        cli_error("plot",
                  "no metric '%s' in %s (mpcsim report %s --csv lists the runs' "
                  "metrics)",
                  o.metric, o.db, o.db);
        rdb_close(db);
        free(c.where);
        return 2;
    }
    if (o.figure || o.y) { /* the faceted figures only */
        st = plot_faceted(&c, &o);
        goto done;
    }
    st = plot_axes(&c, o.x, o.by);
    if (!st)
        st = plot_prepare(&c, &o);
    if (!st) {
        plot_latency(&c);
        plot_comm(&c);
        plot_breakdown(&c);
        plot_pareto(&c);
        if (o.metric)
            plot_metric(&c);
        st = c.failed ? 1 : 0;
    }
done:
    if (!c.keep && c.tmp[0] && strstr(c.tmp, "mpcsim-plot-"))
        rm_tmp(c.tmp);
    free(c.where);
    rdb_close(db);
    dbvar_free(c.var);
    return st;
}

/* cmd_plot.c — `mpcsim plot`: its options, and what the standard plots are drawn by: the x axis
 * (--x, or what varies), the panel expression (--by) and the series expression (a policy
 * configuration — policy_label, plus the protocol, model or network when those vary and are not
 * panels, plus the config keys of runs that would still merge). The standard plots themselves
 * (latency, comm, breakdown, pareto, metric-M) are plot_std.c's, the faceted figures of an
 * eviction study (--figure, --y) plot_rel.c's; both fill the figures of sim/figure, each drawn
 * by one self-contained gnuplot script (plot_draw) into PNG, SVG or PDF. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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
#include "plot_int.h"
#include "models/model.h"
#include "results/rdb.h"

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
               "A row of panels per model and network; a marker per policy configuration (its\n"
               "label holds the parameters that differ from the defaults), with the protocol,\n"
               "model or network added when they vary and are not panels, coloured by policy\n"
               "family; other differences are averaged (against a measured x, a cost, a family's\n"
               "line joins its budgets per model and context instead, never across them). Panels\n"
               "without runs are left out: each row keeps its own, titled with their facets. A\n"
               "configuration on another family's points is drawn as a larger hollow ring, its\n"
               "family's line dashed, its legend entry naming the other. One legend under the\n"
               "panels; panels of a fixed size. Axes show s/min/h/d and B/kB/MB/GB/TB as the\n"
               "values need, bytes and seconds from 0 (log past two decades). --data DIR keeps\n"
               "each figure's gnuplot script (data inline) to edit and re-plot.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "exit status: 0 ok; 1 gnuplot or database failure; 2 bad usage, no such database,\n"
               "or nothing to plot\n");
}

/* ---- helpers --------------------------------------------------------------------------- */

/* sql (from sqlite3_mprintf, NULL on OOM; freed here) prepared on the results database;
 * NULL on failure, after the error message when report. */
sqlite3_stmt *plot_stmt(const plot_ctx *c, char *sql, int report)
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
int64_t query_int(plot_ctx *c, const char *fmt, ...)
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

int is_net_axis(const char *x) { return !strcmp(x, "latency_ms") || !strcmp(x, "bandwidth_mbps"); }

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
    return 0;
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
    const char *name;                   /* the file name of the one figure drawn */
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
                 "decode-step bytes, front marked), or study (all three);\n"
                 "breakdown: only the breakdown plot"},
        {.name = "name",
         .kind = CLI_STR,
         .dest = &o->name,
         .arg = "NAME",
         .help = "the file name (without extension) of the one figure\n"
                 "drawn by --figure (not study) or --y"},
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
         .help = "keep each figure's gnuplot script (data inline) in DIR"},
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
    static const char *const figs[] = {"budget", "cost", "pareto", "study", "breakdown"};
    int f = -1;
    for (int i = 0; o->figure && i < 4; i++)
        if (!strcmp(o->figure, figs[i]))
            f = i;
    if (o->figure && f < 0) {
        const char *dym = did_you_mean(o->figure, figs, 5);
        cli_error("plot", "--figure is budget, cost, pareto, study or breakdown, not '%s'%s%s%s",
                  o->figure, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
        return 2;
    }
    if (o->name && f == 3) {
        cli_error("plot", "--figure study draws three files: no --name");
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
                       .ext = c->ext,
                       .name = o->name};
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
    int bd_only = o.figure && !strcmp(o.figure, "breakdown");
    if (o.name && (!o.name[0] || strchr(o.name, '/') || (!o.y && !o.figure))) {
        cli_error("plot", "%s",
                  !o.y && !o.figure ? "--name names the one figure of --figure or --y"
                                    : "--name is a file name in the output folder (-o)");
        st = 2;
        goto done;
    }
    if ((o.figure && !bd_only) || o.y) { /* the faceted figures only */
        st = plot_faceted(&c, &o);
        goto done;
    }
    st = plot_axes(&c, o.x, o.by);
    if (!st)
        st = plot_prepare(&c, &o);
    c.name = o.name;
    if (!st && bd_only) {
        plot_breakdown(&c);
        st = c.failed ? 1 : 0;
    } else if (!st) {
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

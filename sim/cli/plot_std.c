/* plot_std.c — the standard plots of `mpcsim plot` (latency, comm, metric-M, breakdown,
 * pareto) as faceted figures (sim/figure): a row of panels per value of the panel expression
 * (--by), a column per measure, a marker per series (policy configuration, and what else
 * varies outside the panels) coloured by policy family, one legend under the panels. The
 * options, the panel and series expressions and the x axis are cmd_plot.c's (plot_int.h). */
#include "plot_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "plot_rel.h"
#include "protocols/base/metric_def.h"
#include "protocols/program/op.h"
#include "results/rdb.h"

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

/* The panel of that name among P's, -1 when it is not drawn. */
static int panel_of(const panels *P, const char *name)
{
    for (int i = 0; name && i < P->n; i++)
        if (!strcmp(P->name[i], name))
            return i;
    return -1;
}

/* ---- the standard plots as faceted figures (sim/figure): a row per panel ---------------- */

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

/* A figure's heading and second line: what every run shares, and what a legend entry is. */
static void std_heading(const plot_ctx *c, char *title, size_t tn, char *sub, size_t sn,
                        const char *heading, const char *legend)
{
    snprintf(title, tn, "%s", heading);
    snprintf(sub, sn, "%s%s%s%s", c->title, c->title[0] ? "; " : "", legend,
             c->serieskeys[0] ? c->serieskeys : "configuration");
}

/* An empty relplot with a row per panel of P (named by its title). */
static void std_rows(relplot *R, const panels *P)
{
    memset(R, 0, sizeof *R);
    for (int p = 0; p < P->n; p++)
        rp_index(R, 'r', P->title[p], 0);
}

/* The x axis of the line plots: the runs column; a network's values on a log scale when they
 * span a factor of 4 or more. */
static rp_axis std_x(plot_ctx *c)
{
    rp_axis a = {.log = -1};
    snprintf(a.label, sizeof a.label, "%s", c->xlabel);
    if (is_net_axis(c->xcol)) {
        char e[256];
        snprintf(e, sizeof e,
                 "SELECT min(r.%s) > 0 AND max(r.%s) >= 4 * min(r.%s) FROM runs r "
                 "WHERE r.status = 'ok' %%s",
                 c->xcol, c->xcol, c->xcol);
        a.log = query_int(c, e, c->where) == 1;
    }
    return a;
}

/* A run's policy configuration's kept fraction (the mean over its runs): series are ordered by
 * family (full first), then by it, so a family's budgets follow one another. */
#define KEPT_SQL                                                                  \
    "(SELECT avg(m.value) FROM metrics m JOIN runs r2 ON r2.id = m.run_id WHERE " \
    "r2.policy_label = r.policy_label AND m.name = 'kept_frac')"

/* The points of column col of R: per panel of P, series and x, the means of xsql and ysql over
 * the runs that have both; the colour is the policy family, the marker the series. */
static int std_points(plot_ctx *c, relplot *R, const panels *P, int col, const char *xsql,
                      const char *ysql)
{
    char *sql = sqlite3_mprintf(
        "SELECT %s AS p, coalesce(min(r.policy), '') AS fam, %s AS s, avg(%s), avg(%s), "
        "min(" KEPT_SQL ") AS kf FROM runs r WHERE r.status = 'ok' %s AND (%s) IS NOT NULL AND "
        "(%s) IS NOT NULL GROUP BY p, s, r.%s ORDER BY fam <> 'full', fam, kf, s, r.%s",
        c->panel, c->series, xsql, ysql, c->where, xsql, ysql, c->xcol, c->xcol);
    sqlite3_stmt *s = plot_stmt(c, sql, 1);
    if (!s)
        return -1;
    while (sqlite3_step(s) == SQLITE_ROW) {
        int row = panel_of(P, (const char *)sqlite3_column_text(s, 0));
        if (row < 0)
            continue;
        int hue = rp_index(R, 'h', (const char *)sqlite3_column_text(s, 1), 0);
        int sty = rp_index(R, 's', (const char *)sqlite3_column_text(s, 2), hue);
        rp_add(R, row, col, hue, sty, sqlite3_column_double(s, 3), sqlite3_column_double(s, 4));
    }
    sqlite3_finalize(s);
    return 0;
}

static void std_draw(plot_ctx *c, const char *name, const relplot *R, const barplot *B)
{
    plot_dest d = {c->tmp, c->outdir, c->term, c->ext, c->keep};
    if (c->name)
        name = c->name;
    if ((R && R->dropped) || (B && B->dropped))
        fprintf(stderr,
                "mpcsim plot: warning: %s: %d values left out (too many panels, lines or "
                "categories); narrow with --where\n",
                name, R ? R->dropped : B->dropped);
    if (plot_draw(&d, name, R, B))
        c->failed++;
}

/* A row per panel, a column per value (e.g. total latency | per token), x the runs column. */
static void plot_lines(plot_ctx *c, const char *plot, const char *heading, const char *const *ysql,
                       const int *kind, const char *const *what, int nv)
{
    panels P;
    static relplot R;
    if (get_panels(c, "1", &P))
        return (void)c->failed++;
    if (P.n == 0)
        return;
    std_rows(&R, &P);
    R.x = std_x(c);
    R.y_per_col = nv > 1;
    for (int k = 0; k < nv; k++) {
        R.y[k] = (rp_axis){.kind = kind[k], .log = -1, .zero = kind[k] != 0};
        snprintf(R.y[k].label, sizeof R.y[k].label, "%s", what[k]);
        if (nv > 1)
            rp_index(&R, 'c', what[k], 0);
        char xsql[64];
        snprintf(xsql, sizeof xsql, "r.%s", c->xcol);
        if (std_points(c, &R, &P, nv > 1 ? k : 0, xsql, ysql[k]))
            return (void)c->failed++;
    }
    std_heading(c, R.title, sizeof R.title, R.subtitle, sizeof R.subtitle, heading,
                "colour: policy family, a marker per ");
    std_draw(c, plot, &R, NULL);
}

void plot_latency(plot_ctx *c)
{
    const char *ys[2] = {Y_TOTAL, Y_TOKEN};
    const char *what[2] = {"online latency, whole run", "online latency, decode per token"};
    int kind[2] = {'s', 's'};
    int first = c->lat == 2, nv = c->lat ? 1 : 2;
    plot_lines(c, "latency", "Online latency", ys + first, kind, what + first, nv);
}

void plot_comm(plot_ctx *c)
{
    const char *ys[2] = {Y_ONLINE, Y_OFFLINE}, *what[2] = {"online bytes", "offline bytes"};
    int kind[2] = {'B', 'B'};
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs r WHERE r.status = 'ok' %%s AND %s > 0",
             Y_OFFLINE);
    int off = query_int(c, sql, c->where) > 0;
    plot_lines(c, "comm", "Communication of the whole run", ys, kind, what, off ? 2 : 1);
}

void plot_metric(plot_ctx *c)
{
    char ysql[256], plot[96];
    const metric_def *d = metric_def_find(c->metric);
    char *q = sqlite3_mprintf("(SELECT value FROM metrics m WHERE m.run_id = r.id AND m.name = "
                              "%Q)",
                              c->metric);
    snprintf(ysql, sizeof ysql, "%s", q ? q : "NULL");
    sqlite3_free(q);
    const char *ys[1] = {ysql}, *what[1] = {c->metric};
    int kind[1] = {d && !strcmp(d->unit, "s") ? 's' : d && !strcmp(d->unit, "B") ? 'B' : 0};
    snprintf(plot, sizeof plot, "metric-%s", c->metric);
    plot_lines(c, plot, c->metric, ys, kind, what, 1);
}

/* ---- breakdown: horizontal stacked bars, one per series, at each panel's largest x ------- */

/* Column col of row p of B: the configurations' bars of `value` (time in ns, or bytes) per op
 * category at x, one decode step's (the mean over the decode) or the whole run's. */
static int bars_fill(plot_ctx *c, barplot *B, int p, const char *panel, int col, const char *value,
                     double scale, double x)
{
    char *sql = sqlite3_mprintf(
        "SELECT s, category, avg(v) FROM (SELECT %s AS s, b.category AS category, sum(%s) %s AS "
        "v, min(b.rowid) AS ord, coalesce(min(r.policy), '') AS fam, min(" KEPT_SQL ") AS kf "
        "FROM runs r JOIN breakdown b ON b.run_id = r.id WHERE r.status = 'ok' %s AND "
        "b.category <> 'total' AND (%s) = ?1 AND r.%s = ?2 %s GROUP BY r.id, b.category) "
        "GROUP BY s, category ORDER BY min(fam <> 'full'), min(fam), min(kf), s, min(ord)",
        c->series, value, c->bd_run ? "" : "/ max(r.decode_len, 1)", c->where, c->panel, c->xcol,
        c->bd_run ? "" : "AND b.phase = 'decode' AND r.decode_len > 0");
    sqlite3_stmt *s = plot_stmt(c, sql, 1);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, panel, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 2, x);
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *cat = (const char *)sqlite3_column_text(s, 1);
        int b = bp_index(B, 'b', (const char *)sqlite3_column_text(s, 0), p);
        int k = bp_index(B, 'k', cat ? cat : "", 0);
        if (k >= 0) { /* a category keeps its colour (its place among the op categories) */
            int lt = 0;
            while (lt < OPC_N && strcmp(op_cat_name(lt), B->cat[k]))
                lt++;
            B->cat_colour[k] = lt;
        }
        bp_add(B, p, col, b, k, sqlite3_column_double(s, 2) * scale);
    }
    sqlite3_finalize(s);
    return 0;
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

void plot_breakdown(plot_ctx *c)
{
    panels P;
    static barplot B;
    if (get_panels(c, "1", &P))
        return (void)c->failed++;
    if (P.n == 0)
        return;
    memset(&B, 0, sizeof B);
    B.ncol = 2;
    B.ax[0] = (rp_axis){.label = "time, compute and network wait", .kind = 's', .zero = 1};
    B.ax[1] = (rp_axis){.label = "online bytes", .kind = 'B', .zero = 1};
    for (int p = 0; p < P.n; p++) {
        double x = panel_max_x(c, P.name[p]);
        char title[RP_NAME];
        breakdown_title(c, P.title[p], x, title, sizeof title);
        int row = bp_index(&B, 'r', title, 0);
        if (bars_fill(c, &B, row, P.name[p], 0, "b.compute_ns + b.comm_ns", 1e-9, x) ||
            bars_fill(c, &B, row, P.name[p], 1, "b.bytes_p0 + b.bytes_p1 + b.bytes_p2", 1, x))
            return (void)c->failed++;
    }
    std_heading(c, B.title, sizeof B.title, B.subtitle, sizeof B.subtitle,
                c->bd_run ? "Per-category breakdown of the whole run"
                          : "Per-category breakdown of one decode step (mean over the decode)",
                "a bar per ");
    std_draw(c, "breakdown", NULL, &B);
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

void plot_pareto(plot_ctx *c)
{
    char metric[48];
    if (!pareto_metric(c, metric, sizeof metric)) {
        printf("note: no accuracy metrics in these runs; skipping the Pareto plot\n");
        return;
    }
    char need[256], acc[256];
    snprintf(need, sizeof need,
             "EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.id AND m.name = '%s')", metric);
    sqlite3_snprintf(sizeof acc, acc,
                     "(SELECT value FROM metrics m WHERE m.run_id = r.id AND m.name = %Q)", metric);
    panels P;
    static relplot R;
    if (get_panels(c, need, &P))
        return (void)c->failed++;
    int lower = rdb_metric_lower_is_better(metric);
    std_rows(&R, &P);
    R.x_per_col = 1;
    R.xc[0] = (rp_axis){.kind = 's', .log = -1, .zero = 1};
    snprintf(R.xc[0].label, sizeof R.xc[0].label, "%s",
             c->lat == 1 ? "online latency, whole run" : "online latency, decode per token");
    R.xc[1] = (rp_axis){.label = "online bytes, whole run", .kind = 'B', .log = -1, .zero = 1};
    R.y[0] = (rp_axis){.log = -1};
    snprintf(R.y[0].label, sizeof R.y[0].label, "%s", metric);
    rp_index(&R, 'c', "latency", 0);
    rp_index(&R, 'c', "bytes", 0);
    R.ncol = 2;
    R.pareto = 1;
    R.pareto_dir = lower ? -1 : 1;
    if (std_points(c, &R, &P, 0, c->lat == 1 ? Y_TOTAL : Y_TOKEN, acc) ||
        std_points(c, &R, &P, 1, Y_ONLINE, acc))
        return (void)c->failed++;
    char heading[128];
    snprintf(heading, sizeof heading, "%s against cost; Pareto front dashed (%s is better)", metric,
             lower ? "lower" : "higher");
    std_heading(c, R.title, sizeof R.title, R.subtitle, sizeof R.subtitle, heading,
                "colour: policy family, a marker per ");
    std_draw(c, "pareto", &R, NULL);
}

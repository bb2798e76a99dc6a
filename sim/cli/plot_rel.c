/* plot_rel.c — `mpcsim plot --figure F` and `--y METRICS`: the faceted figures of an eviction
 * study (sim/figure/relplot.h) filled from a results database. A point is a policy
 * configuration's average over the runs of one panel at one x; its colour is the policy family,
 * its marker the configuration (its budget), a line joins a family's points. */
#include "plot_rel.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "gnuplot.h"
#include "protocols/base/err.h"
#include "protocols/base/metric_def.h"
#include "sim/figure/relplot.h"

/* ---- axes: a runs column, a metric, or a policy parameter --------------------------------- */

typedef struct axis_src {
    char sql[512];
    rp_axis ax;
    char name[64];
    int metric; /* a metric of the registry (its direction is known) */
} axis_src;

static const struct {
    const char *name, *label;
} axis_names[] = {
    {"kept_frac", "KV budget (kept fraction of the cache)"},
    {"bytes_decode_step", "online bytes per decode step"},
    {"latency_decode_step_s", "latency per decode step"},
    {"rounds_decode_step", "rounds per decode step"},
    {"attn_mass_recall", "attention mass recall"},
    {"topk_recall", "top-k recall"},
    {"top1_agreement", "top-1 agreement with the full cache"},
    {"logit_kl", "logit KL from the full cache (nats)"},
    {"attn_out_rel_err", "attention output relative error"},
    {"ppl_delta", "perplexity increase"},
    {"latency_per_token_s", "decode latency per token"},
    {"latency_total_s", "latency of the whole run"},
    {"bytes_online", "online bytes of the whole run"},
    {"prompt_len", "prompt length (tokens)"},
    {"decode_len", "generated tokens"},
    {"batch", "sequences per batch"},
    {"latency_ms", "one-way link latency (ms)"},
    {"bandwidth_mbps", "link bandwidth (Mbit/s)"},
};

static const char *nice_label(const char *name)
{
    for (size_t i = 0; i < sizeof axis_names / sizeof axis_names[0]; i++)
        if (!strcmp(axis_names[i].name, name))
            return axis_names[i].label;
    return name;
}

static long long count(sqlite3 *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *s;
    long long v = -1;
    if (sql && sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_free(sql);
    return v;
}

/* name → the SQL of its value per run `r`, its axis and unit. 0, or 2 after the error. */
static int axis_of(sqlite3 *h, const char *where, const char *name, axis_src *a)
{
    static const char *const cols[] = {"prompt_len", "decode_len", "batch", "latency_ms",
                                       "bandwidth_mbps"};
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->ax.label, sizeof a->ax.label, "%s", nice_label(name));
    a->ax.log = -1;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (!strcmp(name, cols[i])) {
            snprintf(a->sql, sizeof a->sql, "r.%s", name);
            return 0;
        }
    if (count(h, "SELECT count(*) FROM metrics WHERE name = %Q", name) > 0) {
        const metric_def *d = metric_def_find(name);
        sqlite3_snprintf(sizeof a->sql, a->sql,
                         "(SELECT value FROM metrics mx WHERE mx.run_id = r.id AND mx.name = %Q)",
                         name);
        a->metric = d != NULL;
        if (d && !strcmp(d->unit, "s"))
            a->ax.kind = 's', a->ax.zero = 1;
        else if (d && !strcmp(d->unit, "B"))
            a->ax.kind = 'B', a->ax.zero = 1;
        else if (d && !strcmp(d->unit, "rounds"))
            a->ax.zero = 1;
        return 0;
    }
    const char *param = !strncmp(name, "policy.", 7) ? name + 7 : name;
    char path[128];
    sqlite3_snprintf(sizeof path, path, "$.policies[0].%w", param);
    if (count(h,
              "SELECT count(*) FROM runs r WHERE r.status = 'ok' %s AND "
              "typeof(json_extract(r.config_json, %Q)) IN ('integer', 'real')",
              where, path) > 0) {
        sqlite3_snprintf(sizeof a->sql, a->sql, "json_extract(r.config_json, %Q)", path);
        snprintf(a->ax.label, sizeof a->ax.label, "policy parameter %s", param);
        return 0;
    }
    cli_error("plot",
              "'%s' is no axis here: a runs column (prompt_len, decode_len, batch, latency_ms, "
              "bandwidth_mbps), a metric this database holds (mpcsim report DB --csv lists "
              "them; kept_frac is the budget), or a numeric policy parameter",
              name);
    return 2;
}

/* ---- facets: one key or several joined ---------------------------------------------------- */

static const char *const facet_keys[] = {"model",      "protocol",   "network", "policy",
                                         "prompt_len", "decode_len", "machine"};
#define N_FACET_KEYS (sizeof facet_keys / sizeof facet_keys[0])

static const char *facet_sql(const char *key)
{
    if (!strcmp(key, "model"))
        return "r.model";
    if (!strcmp(key, "protocol"))
        return "r.protocol_label";
    if (!strcmp(key, "network"))
        return "r.network";
    if (!strcmp(key, "policy"))
        return "r.policy";
    if (!strcmp(key, "prompt_len"))
        return "('prompt ' || r.prompt_len)";
    if (!strcmp(key, "decode_len"))
        return "(r.decode_len || ' generated')";
    if (!strcmp(key, "machine"))
        return "(coalesce(r.machine, 'default') || ' ' || coalesce(r.threads, 1) || 't')";
    return NULL;
}

/* KEYS (comma-separated facet keys, or "none") → an SQL expression, "" for none; used[k] set.
 * 0, or 2 after the error. */
static int facet_expr(const char *opt, const char *keys, char *out, size_t n, int *used)
{
    char buf[128];
    size_t l = 0;
    out[0] = '\0';
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "none"))
            continue;
        size_t k = 0;
        while (k < N_FACET_KEYS && strcmp(facet_keys[k], t))
            k++;
        if (k == N_FACET_KEYS) {
            const char *dym = did_you_mean(t, facet_keys, N_FACET_KEYS);
            cli_error("plot",
                      "--%s takes model, protocol, network, policy, prompt_len, decode_len, "
                      "machine or none, not '%s'%s%s%s",
                      opt, t, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
            return 2;
        }
        used[k] = 1;
        l += (size_t)snprintf(out + l, l < n ? n - l : 0, "%s%s", l ? " || ' · ' || " : "",
                              facet_sql(facet_keys[k]));
    }
    return 0;
}

/* The keys (other than those used) whose values vary over the plotted runs (where, and the
 * runs that have the figure's values: `have`), comma-separated. */
static void varying(sqlite3 *h, const char *where, const char *have, const int *used, char *out,
                    size_t n, int policy_too)
{
    size_t l = 0;
    out[0] = '\0';
    for (size_t k = 0; k < N_FACET_KEYS; k++) {
        if (used[k] || (!policy_too && !strcmp(facet_keys[k], "policy")))
            continue;
        if (count(h, "SELECT count(DISTINCT %s) FROM runs r WHERE r.status = 'ok' %s AND %s",
                  facet_sql(facet_keys[k]), where, have) > 1)
            l += (size_t)snprintf(out + l, l < n ? n - l : 0, "%s%s", l ? "," : "", facet_keys[k]);
    }
}

/* ---- the figure --------------------------------------------------------------------------- */

/* An accuracy metric the database holds: want, else attention mass recall, else the first. */
static int pick_accuracy(sqlite3 *h, const char *want, char *out, size_t n)
{
    if (want) {
        snprintf(out, n, "%s", want);
        return 0;
    }
    static const char *const pref[] = {"attn_mass_recall", "top1_agreement", "logit_kl",
                                       "topk_recall", "attn_out_rel_err"};
    for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++)
        if (count(h, "SELECT count(*) FROM metrics WHERE name = %Q", pref[i]) > 0) {
            snprintf(out, n, "%s", pref[i]);
            return 0;
        }
    return -1;
}

int plot_rel(const plot_rel_args *a)
{
    static relplot P; /* large: not on the stack */
    memset(&P, 0, sizeof P);
    sqlite3 *h = a->h;
    char ys[512], xname[64], acc[64], file[96];
    const char *fig = a->figure ? a->figure : "";
    int is_budget = !strcmp(fig, "budget"), is_cost = !strcmp(fig, "cost"),
        is_pareto = !strcmp(fig, "pareto");
    if ((is_budget || is_pareto) && pick_accuracy(h, a->metric, acc, sizeof acc)) {
        cli_error("plot",
                  "--figure %s needs an accuracy metric: the runs have none (replay a "
                  "trace: `trace:` in the scenario)",
                  fig);
        return 2;
    }
    if (is_budget)
        snprintf(ys, sizeof ys, "%s", acc);
    else if (is_cost)
        snprintf(ys, sizeof ys, "latency_decode_step_s,bytes_decode_step");
    else if (is_pareto)
        snprintf(ys, sizeof ys, "%s", acc);
    else
        snprintf(ys, sizeof ys, "%s", a->y);
    snprintf(xname, sizeof xname, "%s",
             a->x        ? a->x
             : is_pareto ? "bytes_decode_step"
             : count(h, "SELECT count(*) FROM metrics WHERE name = 'kept_frac'") > 0
                 ? "kept_frac"
                 : "prompt_len");
    axis_src X, Y[RP_MAX_FACETS];
    int ny = 0, st;
    if ((st = axis_of(h, a->where, xname, &X)))
        return st;
    P.x = X.ax;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", ys);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (ny == RP_MAX_FACETS) {
            cli_error("plot", "--y takes at most %d metrics", RP_MAX_FACETS);
            return 2;
        }
        if ((st = axis_of(h, a->where, t, &Y[ny])))
            return st;
        P.y[ny] = Y[ny].ax;
        ny++;
    }
    if (ny > 1 && a->col) {
        cli_error("plot", "with several --y metrics the columns are the metrics: no --col");
        return 2;
    }
    P.y_per_col = ny > 1;

    /* facets: asked for, or what varies (a figure's own default) */
    int used[N_FACET_KEYS] = {0};
    used[3] = 1; /* the policy is the colour */
    /* what varies along x is no facet */
    used[4] = !strcmp(xname, "prompt_len");
    used[5] = !strcmp(xname, "decode_len");
    used[2] = !strcmp(xname, "latency_ms") || !strcmp(xname, "bandwidth_mbps");
    char rowkeys[128], colkeys[128], rowsql[1024], colsql[1024], rest[256];
    if (a->row)
        snprintf(rowkeys, sizeof rowkeys, "%s", a->row);
    if (a->col)
        snprintf(colkeys, sizeof colkeys, "%s", a->col);
    /* accuracy against a budget or a parameter: no protocol or network changes it (the replay
     * is in the clear), so they are no facets; a cost or the Pareto front depends on both */
    int accuracy_only = !is_pareto && ny == 1 && Y[0].metric &&
                        metric_def_find(Y[0].name)->kind == MK_ACCURACY &&
                        !(X.metric && metric_def_find(X.name)->kind == MK_COST);
    if (accuracy_only && !a->row)
        used[1] = used[2] = 1;
    char have[2048]; /* the runs the figure has values for */
    snprintf(have, sizeof have, "%s IS NOT NULL AND %s IS NOT NULL", X.sql, Y[0].sql);
    if (!a->col && ny == 1) {
        /* columns: the context length for accuracy (no protocol or network changes it), the
         * protocol and the network for a cost */
        int u2[N_FACET_KEYS] = {1, 1, 1, 1, 0, 1, 1};
        if (!accuracy_only)
            u2[1] = u2[2] = 0, u2[4] = 1;
        for (size_t k = 0; k < N_FACET_KEYS; k++)
            u2[k] |= used[k];
        varying(h, a->where, have, u2, colkeys, sizeof colkeys, 0);
        if (!colkeys[0])
            snprintf(colkeys, sizeof colkeys, "none");
    } else if (!a->col)
        snprintf(colkeys, sizeof colkeys, "none");
    if ((st = facet_expr("col", colkeys, colsql, sizeof colsql, used)))
        return st;
    if (!a->row) { /* rows: whatever else varies */
        varying(h, a->where, have, used, rowkeys, sizeof rowkeys, 0);
        if (!rowkeys[0])
            snprintf(rowkeys, sizeof rowkeys, "none");
    }
    if ((st = facet_expr("row", rowkeys, rowsql, sizeof rowsql, used)))
        return st;
    varying(h, a->where, have, used, rest, sizeof rest, 0);
    /* x measured (a cost, say): what else varies (the model, the context) moves a configuration's
     * points, which are then kept apart, each group its own line, rather than averaged or joined
     * across models; x a parameter (the budget): they are averaged at each x, as before */
    char grpsql[1024] = "";
    int dummy[N_FACET_KEYS] = {0},
        by_grp = rest[0] && X.metric && metric_def_find(X.name)->kind != MK_POLICY;
    if (by_grp && (st = facet_expr("row", rest, grpsql, sizeof grpsql, dummy)))
        return st;

    /* the points: per panel, family, configuration and x, the mean of y */
    int nruns_avg = 0, ngrp = 0;
    enum { MAX_GRPS = 512 };
    static char grp_name[MAX_GRPS][RP_NAME];
    for (int k = 0; k < ny; k++) {
        char *sql = sqlite3_mprintf(
            "SELECT %s, %s, r.policy, r.policy_label, x, avg(y), count(*), "
            "count(DISTINCT round(y, 12)), %s FROM (SELECT r.*, %s AS x, %s AS y FROM runs r WHERE "
            "r.status = 'ok' %s) r WHERE x IS NOT NULL AND y IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 9 "
            "ORDER BY min(r.model), min(r.protocol_label), min(r.latency_ms), "
            "-max(r.bandwidth_mbps), 1, 2, r.policy <> 'full', 3, "
            "(SELECT avg(m.value) FROM metrics m JOIN runs r2 ON r2.id = m.run_id WHERE "
            "r2.policy_label = r.policy_label AND m.name = 'kept_frac'), 4, 5",
            rowsql[0] ? rowsql : "''", colsql[0] ? colsql : "''", grpsql[0] ? grpsql : "''", X.sql,
            Y[k].sql, a->where);
        sqlite3_stmt *s;
        if (!sql || sqlite3_prepare_v2(h, sql, -1, &s, NULL) != SQLITE_OK) {
            cli_error("plot", "%s", sqlite3_errmsg(h));
            sqlite3_free(sql);
            return 1;
        }
        sqlite3_free(sql);
        while (sqlite3_step(s) == SQLITE_ROW) {
            const char *rn = (const char *)sqlite3_column_text(s, 0);
            const char *cn = (const char *)sqlite3_column_text(s, 1);
            int r = rp_index(&P, 'r', rn ? rn : "", 0);
            int c = ny > 1 ? k : rp_index(&P, 'c', cn ? cn : "", 0);
            if (ny > 1 && P.ncol <= k)
                rp_index(&P, 'c', nice_label(Y[k].name), 0);
            int hue = rp_index(&P, 'h', (const char *)sqlite3_column_text(s, 2), 0);
            int sty = rp_index(&P, 's', (const char *)sqlite3_column_text(s, 3), hue);
            const char *gn = (const char *)sqlite3_column_text(s, 8);
            int g = 0;
            while (g < ngrp && strcmp(grp_name[g], gn ? gn : ""))
                g++;
            if (g == ngrp && ngrp < MAX_GRPS)
                snprintf(grp_name[ngrp++], sizeof grp_name[0], "%s", gn ? gn : "");
            rp_add_grp(&P, r, c, hue, sty, g < MAX_GRPS ? g : -1, sqlite3_column_double(s, 4),
                       sqlite3_column_double(s, 5));
            nruns_avg += sqlite3_column_int(s, 7) > 1;
        }
        sqlite3_finalize(s);
    }
    if (!P.n) {
        cli_error("plot", "no finished run has both %s and %s%s", xname, ys,
                  a->where[0] ? " among those --where keeps" : "");
        return 2;
    }
    /* a single unnamed row or column is no facet */
    if (P.nrow == 1 && !P.row_name[0][0])
        P.nrow = 0;
    if (P.ncol == 1 && !P.col_name[0][0])
        P.ncol = 0;
    if (P.dropped)
        fprintf(stderr,
                "mpcsim plot: warning: %d points left out (more than %d rows or columns, %d "
                "families or %d configurations); narrow with --where\n",
                P.dropped, RP_MAX_FACETS, RP_MAX_HUES, RP_MAX_STYLES);
    if (nruns_avg && rest[0])
        fprintf(stderr,
                "mpcsim plot: warning: %d points average runs that differ (they vary in %s): "
                "facet with --row/--col or narrow with --where\n",
                nruns_avg, rest);

    if (is_pareto) {
        const metric_def *d = metric_def_find(Y[0].name);
        P.pareto = 1;
        P.pareto_dir = d && d->dir == MD_LOWER ? -1 : 1;
    }
    char what[200] = "";
    for (int k = 0, l = 0; k < ny && l < (int)sizeof what; k++)
        l += snprintf(what + l, sizeof what - (size_t)l, "%s%s",
                      k == 0        ? ""
                      : k == ny - 1 ? " and "
                                    : ", ",
                      nice_label(Y[k].name));
    snprintf(P.title, sizeof P.title, "%s against %s", is_cost ? "decode-step cost" : what,
             !strcmp(xname, "kept_frac") ? "KV budget" : nice_label(xname));
    if (is_pareto)
        snprintf(P.title, sizeof P.title, "%s against %s; Pareto front dashed (%s is better)",
                 nice_label(Y[0].name), nice_label(xname), P.pareto_dir > 0 ? "higher" : "lower");
    snprintf(P.subtitle, sizeof P.subtitle, "%s%s%s%s%s%s", a->subtitle,
             rest[0] && nruns_avg ? (a->subtitle[0] ? "; averaged over " : "averaged over ") : "",
             rest[0] && nruns_avg ? rest : "",
             by_grp ? "; colour: policy family, marker: its configuration, a line per " : "",
             by_grp ? rest : "",
             by_grp ? "" : "; colour: policy family, marker: its configuration");
    if (is_budget)
        snprintf(file, sizeof file, "accuracy-budget");
    else if (is_cost)
        snprintf(file, sizeof file, "cost-budget");
    else if (is_pareto)
        snprintf(file, sizeof file, "pareto-step");
    else
        snprintf(file, sizeof file, "%.40s-vs-%.40s", Y[0].name, xname);

    plot_dest d = {a->tmp, a->outdir, a->term, a->ext, 1};
    return plot_draw(&d, a->name ? a->name : file, &P, NULL);
}

int plot_draw(const plot_dest *d, const char *name, const relplot *R, const barplot *B)
{
    char script[4200], out[4200];
    snprintf(script, sizeof script, "%s/%s.gp", d->tmp, name);
    snprintf(out, sizeof out, "%s/%s.%s", d->outdir, name, d->ext);
    FILE *f = fopen(script, "w");
    if (!f) {
        cli_error("plot", "cannot write %s: %s", script, strerror(errno));
        return 1;
    }
    int wrc =
        R ? rp_write(R, f, d->term, out, gnuplot_str) : bp_write(B, f, d->term, out, gnuplot_str);
    if (fclose(f) || wrc) {
        cli_error("plot", "cannot write %s", script);
        return 1;
    }
    char errlog[4200];
    snprintf(errlog, sizeof errlog, "%s/%s.log", d->tmp, name);
    const char *files[] = {script};
    if (gnuplot_run(NULL, files, 1, errlog)) {
        cli_error("plot", "gnuplot failed on %s:", script);
        FILE *e = fopen(errlog, "r");
        char line[512];
        while (e && fgets(line, sizeof line, e))
            fputs(line, stderr);
        if (e)
            fclose(e);
        return 1;
    }
    if (!d->keep)
        unlink(errlog);
    printf("%s\n", out);
    return 0;
}

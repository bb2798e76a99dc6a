/* cmd_report.c — `mpcsim report`: the runs of a results database as a table that fits the
 * terminal (or CSV, or JSON): what was run, what it cost in human units, the accuracy metrics
 * it measured, why failed runs failed, and the serving tables when `mpcsim serve` wrote any. */
#include <jansson.h>
#include <sqlite3.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dbq.h"
#include "dbvar.h"
#include "opt.h"
#include "protocols/base/metric_def.h"
#include "results/rdb.h"
#include "sim/policy/pcheck.h"
#include "table.h"

#define REP_MAX_METRICS 96

static void report_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim report DB [--failed] [--format text|csv|json|markdown|latex]\n"
               "                        [--columns N] [--metrics a,b,...] [--order KEY]\n"
               "                        [--where KEY=VALUE]...\n\n"
               "Prints one row per run: model, protocol and policy (each with the options that\n"
               "differ from its defaults), network, prompt and decode lengths, latency (whole\n"
               "run, decode per token, prefill) in s/min/h/d, online and offline bytes in\n"
               "kB/MB/GB/TB, rounds, and the accuracy metrics present; a table per model.\n"
               "Columns every run shares are printed once above the table; columns that do not\n"
               "fit the width are left out (named below the table), except the metrics asked\n"
               "for with --metrics (without it, the first accuracy metric): for them the label\n"
               "columns wrap first. Rows go by policy\n"
               "family, then budget (kept_frac), or as the scenario lists them (--order\n"
               "scenario). CSV has every metric of the database. Runs these labels show\n"
               "alike get a variant column: the config keys that tell them apart (seed=2).\n"
               "The serving tables of `mpcsim serve` follow, when present.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "exit status: 0 ok; 1 the database cannot be read (damaged, locked); 2 bad usage,\n"
               "no such database, not an mpcsim database or a newer schema, unknown metric\n");
}

/* One table per model (rows are ordered by model; column 1 is the model), fitted to width
 * (text) or for a paper (Markdown, LaTeX), under a heading when there are several. */
static void tab_by_model(table *t, rep_format fmt, int width, size_t shared, FILE *f)
{
    size_t r0 = 0;
    int sections = t->rows > 0 && strcmp(tab_get(t, 0, 1), tab_get(t, t->rows - 1, 1));
    while (r0 < t->rows) {
        size_t r1 = r0 + 1;
        while (r1 < t->rows && !strcmp(tab_get(t, r1, 1), tab_get(t, r0, 1)))
            r1++;
        if (sections && fmt == RF_TEXT)
            fprintf(f, "%s== model %s (%zu run%s)\n", r0 ? "\n" : "", tab_get(t, r0, 1), r1 - r0,
                    r1 - r0 == 1 ? "" : "s");
        else if (sections)
            fprintf(f, fmt == RF_MARKDOWN ? "%s### model %s\n\n" : "%s%% model %s\n",
                    r0 ? "\n" : "", tab_get(t, r0, 1));
        t->c[1].prio = sections ? 99 : 1; /* the heading names it */
        if (fmt == RF_TEXT)
            tab_print(t, width, shared, r0, r1, f);
        else
            tab_paper(t, fmt, shared, r0, r1, f);
        if (sections) /* a one-run section must not show the model twice */
            t->c[1].shown = 0;
        r0 = r1;
    }
}

/* ---- which metric columns -------------------------------------------------------------- */

static int metric_names(sqlite3 *h, char names[][48], size_t max, size_t *n)
{
    sqlite3_stmt *s;
    *n = 0;
    if (sqlite3_prepare_v2(h, "SELECT DISTINCT name FROM metrics ORDER BY name", -1, &s, NULL))
        return -1;
    while (sqlite3_step(s) == SQLITE_ROW && *n < max)
        snprintf(names[(*n)++], 48, "%.47s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return 0;
}

/* Fills cols from --metrics (checked against the stored names), or the accuracy metrics
 * (every metric stored when all is set), the most telling first. */
static int pick_metrics(sqlite3 *h, const char *list, int all, char cols[][48], size_t *nc)
{
    char have[256][48];
    size_t nh;
    *nc = 0;
    if (metric_names(h, have, 256, &nh))
        return 1;
    if (!list) { /* the most telling first: they stay when the width is short */
        static const char *const first[] = {"attn_mass_recall", "top1_agreement",   "logit_kl",
                                            "ppl_delta",        "attn_out_rel_err", "topk_recall"};
        char used[256] = {0};
        for (size_t p = 0; p < sizeof first / sizeof *first; p++)
            for (size_t i = 0; i < nh; i++)
                if (!strcmp(have[i], first[p]) && *nc < REP_MAX_METRICS) {
                    snprintf(cols[(*nc)++], 48, "%.47s", have[i]);
                    used[i] = 1;
                }
        for (size_t i = 0; i < nh && *nc < REP_MAX_METRICS; i++)
            if (!used[i] && rdb_metric_is_accuracy(have[i])) {
                snprintf(cols[(*nc)++], 48, "%.47s", have[i]);
                used[i] = 1;
            }
        for (size_t i = 0; all && i < nh && *nc < REP_MAX_METRICS; i++)
            if (!used[i])
                snprintf(cols[(*nc)++], 48, "%.47s", have[i]);
        return 0;
    }
    const char *cand[256];
    for (size_t i = 0; i < nh; i++)
        cand[i] = have[i];
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < nh && strcmp(have[i], tok))
            i++;
        if (i == nh) {
            const char *dym = did_you_mean(tok, cand, nh);
            cli_error("report", "no metric '%s' in this database%s%s%s", tok,
                      dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
            return 2;
        }
        if (*nc < REP_MAX_METRICS)
            snprintf(cols[(*nc)++], 48, "%.47s", tok);
    }
    return 0;
}

/* ---- the runs -------------------------------------------------------------------------- */

/* Column 0..: the run's identity, then the cost figures (NULL for a failed run). */
#define RUN_SELECT                                                                            \
    "SELECT r.id, r.model, r.protocol_label, r.network, r.policy_label, r.prompt_len, "       \
    "r.decode_len, r.status, "                                                                \
    "(SELECT sum(latency_ns) FROM phases p WHERE p.run_id = r.id) / 1e9, "                    \
    "(SELECT latency_ns FROM phases p WHERE p.run_id = r.id AND p.phase = 'decode') / 1e9 "   \
    "  / nullif(r.decode_len, 0), "                                                           \
    "(SELECT latency_ns FROM phases p WHERE p.run_id = r.id AND p.phase = 'prefill') / 1e9, " \
    "(SELECT sum(bytes_p0 + bytes_p1 + bytes_p2) FROM breakdown b WHERE b.run_id = r.id "     \
    "  AND b.category = 'total'), "                                                           \
    "(SELECT sum(offline_p0 + offline_p1 + offline_p2) FROM breakdown b WHERE b.run_id = "    \
    "  r.id AND b.category = 'total'), "                                                      \
    "(SELECT sum(rounds) FROM breakdown b WHERE b.run_id = r.id AND b.category = 'total'), "  \
    "r.error, r.scenario, r.grid_index, r.config_hash, r.latency_ms, r.bandwidth_mbps, "      \
    "r.machine, r.threads, r.policy, r.batch, r.seed, r.config_json, r.wall_s "               \
    "FROM runs r WHERE 1 %s ORDER BY %s"

/* The rows' orders (--order), each by model first (a table per model). family: the full
 * cache first, then each policy family by its budget (the kept fraction its label measured,
 * averaged over the model's runs with that label, so a label's rows stay together), then the
 * workload, within one protocol and network; scenario: as the scenarios list them. */
#define ORDER_FAMILY                                                                           \
    "r.model, r.protocol, r.protocol_label, r.latency_ms, -r.bandwidth_mbps, r.network, "      \
    "r.policy <> 'full', r.policy, (SELECT avg(m.value) FROM metrics m JOIN runs r2 ON r2.id " \
    "= m.run_id WHERE r2.model = r.model AND r2.policy_label = r.policy_label AND m.name = "   \
    "'kept_frac'), r.policy_label, r.prompt_len, r.decode_len, r.id"
#define ORDER_SCENARIO "r.model, r.scenario, r.grid_index, r.id"

enum {
    R_ID,
    R_MODEL,
    R_PROTO,
    R_NET,
    R_LABEL,
    R_PROMPT,
    R_DECODE,
    R_STATUS,
    R_TOTAL,
    R_TOKEN,
    R_PREFILL,
    R_ONLINE,
    R_OFFLINE,
    R_ROUNDS,
    R_ERROR,
    R_SCN,
    R_GRID,
    R_HASH,
    R_LAT,
    R_BW,
    R_MACH,
    R_THREADS,
    R_POLICY,
    R_BATCH,
    R_SEED,
    R_JSON,
    R_WALL
};

typedef struct rep {
    sqlite3 *h;
    const char *path;
    char mcols[REP_MAX_METRICS][48];
    size_t nm;
    int asked; /* the metrics came from --metrics: never left out */
    char *where;
    const char *order; /* ORDER_FAMILY or ORDER_SCENARIO */
    rep_format fmt;
    int csv, json, failed, width;
    dbvar *var;    /* config keys that tell apart runs whose shown labels are the same */
    json_t *notes; /* --json: what was written differently (non-finite numbers as null) */
} rep;

/* What a row shows of a run: two runs with the same value look alike (dbvar.h). */
#define RUN_IDENT                                                                          \
    "r.model || char(31) || r.protocol_label || char(31) || r.network || char(31) || "     \
    "coalesce(r.machine, 'default') || char(31) || coalesce(r.threads, 1) || char(31) || " \
    "r.policy_label || char(31) || r.prompt_len || char(31) || r.decode_len"

static const char *text(sqlite3_stmt *s, int c)
{
    const char *t = (const char *)sqlite3_column_text(s, c);
    return t ? t : "";
}

static void cell_num(table *t, sqlite3_stmt *s, int c, int csv,
                     void (*human)(char *, size_t, double))
{
    char buf[64];
    if (sqlite3_column_type(s, c) == SQLITE_NULL)
        snprintf(buf, sizeof buf, "%s", csv ? "" : "-");
    else if (csv || !human)
        snprintf(buf, sizeof buf, csv ? "%.17g" : "%.4g", sqlite3_column_double(s, c));
    else
        human(buf, sizeof buf, sqlite3_column_double(s, c));
    tab_add(t, buf);
}

static int metric_of(sqlite3_stmt *m, sqlite3_int64 id, const char *name, double *v)
{
    sqlite3_reset(m);
    sqlite3_bind_int64(m, 1, id);
    sqlite3_bind_text(m, 2, name, -1, SQLITE_STATIC);
    if (sqlite3_step(m) != SQLITE_ROW)
        return 0;
    *v = sqlite3_column_double(m, 0);
    return 1;
}

/* The runs table's columns: what tells runs apart (never left out), then the figures by
 * importance, then the metrics asked for; CSV puts the machine and the variant last. */
static void runs_columns(const rep *R, table *t, int variant)
{
    int csv = R->csv;
    tab_col(t, "id", 4, 1);
    tab_col(t, "model", 1, 0);
    tab_col(t, csv ? "protocol" : "proto", 1, 0);
    tab_col(t, "network", 1, 0);
    if (!csv) /* the machine profile and its threads: the answer depends on them */
        tab_col(t, "machine", 1, 0);
    tab_col(t, "policy", 1, 0);
    if (csv) /* the family apart from the label, which has the options */
        tab_col(t, "policy_label", 1, 0);
    tab_col(t, "prompt", 1, 1);
    tab_col(t, csv ? "decode" : "gen", 1, 1);
    if (variant && !csv) /* what else tells these runs apart */
        tab_col(t, "variant", 1, 0);
    tab_col(t, "status", 1, 0);
    /* the figures give way to the metrics asked for */
    tab_col(t, csv ? "latency_s" : "latency", R->asked ? 2 : 1, 1);
    tab_col(t, csv ? "per_token_s" : "per token", R->asked ? 2 : 1, 1);
    tab_col(t, csv ? "prefill_s" : "prefill", 6, 1);
    tab_col(t, csv ? "online_bytes" : "online", 3, 1);
    tab_col(t, csv ? "offline_bytes" : "offline", 5, 1);
    tab_col(t, "rounds", 7, 1);
    for (size_t c = 0; c < R->nm; c++) /* the most telling accuracy metric stays, as asked */
        tab_col(t, R->mcols[c], R->asked || c == 0 ? 1 : 3 + (int)c, 1);
    if (csv) { /* after the figures: the columns before them keep their places */
        tab_col(t, "machine", 1, 0);
        tab_col(t, "threads", 1, 1);
        tab_col(t, "latency_ms", 1, 1);
        tab_col(t, "bandwidth_mbps", 1, 1);
        tab_col(t, "scenario", 1, 0);
        tab_col(t, "grid_index", 1, 1);
        if (variant)
            tab_col(t, "variant", 1, 0);
    }
}

/* The machine cell: "default (16 threads)". */
static void machine_cell(table *t, sqlite3_stmt *s)
{
    char mach[96];
    const char *mn = text(s, R_MACH);
    int th =
        sqlite3_column_type(s, R_THREADS) == SQLITE_NULL ? 1 : sqlite3_column_int(s, R_THREADS);
    snprintf(mach, sizeof mach, "%s (%d thread%s)", mn[0] ? mn : "default", th, th == 1 ? "" : "s");
    tab_add(t, mach);
}

/* One run's row (RUN_SELECT's row s; its metrics through m), in runs_columns' order. 1 when
 * the run failed. */
static int run_row(const rep *R, table *t, sqlite3_stmt *s, sqlite3_stmt *m, int variant)
{
    int csv = R->csv;
    for (int c = R_ID; c <= R_DECODE; c++) {
        tab_add(t, text(s, c == R_LABEL && csv ? R_POLICY : c));
        if (c == R_NET && !csv)
            machine_cell(t, s);
        if (c == R_LABEL && csv)
            tab_add(t, text(s, R_LABEL));
    }
    const char *vr = dbvar_of(R->var, sqlite3_column_int64(s, R_ID));
    if (variant && !csv)
        tab_add(t, vr);
    int ok = !strcmp(text(s, R_STATUS), "ok");
    tab_add(t, ok ? "ok" : csv ? "failed" : "FAILED");
    cell_num(t, s, R_TOTAL, csv, dbq_seconds);
    cell_num(t, s, R_TOKEN, csv, dbq_seconds);
    cell_num(t, s, R_PREFILL, csv, dbq_seconds);
    cell_num(t, s, R_ONLINE, csv, dbq_bytes);
    cell_num(t, s, R_OFFLINE, csv, dbq_bytes);
    cell_num(t, s, R_ROUNDS, csv, NULL);
    for (size_t c = 0; c < R->nm; c++) {
        char buf[64];
        double v;
        const metric_def *md = metric_def_find(R->mcols[c]);
        if (!metric_of(m, sqlite3_column_int64(s, R_ID), R->mcols[c], &v))
            snprintf(buf, sizeof buf, "%s", csv ? "" : "-");
        else if (!csv && md && !strcmp(md->unit, "s")) /* the registry's unit, in human units */
            dbq_seconds(buf, sizeof buf, v);
        else if (!csv && md && !strcmp(md->unit, "B"))
            dbq_bytes(buf, sizeof buf, v);
        else
            snprintf(buf, sizeof buf, csv ? "%.17g" : "%.4g", v);
        tab_add(t, buf);
    }
    if (csv) {
        tab_add(t, text(s, R_MACH));
        tab_add(t, text(s, R_THREADS));
        tab_add(t, text(s, R_LAT));
        tab_add(t, text(s, R_BW));
        tab_add(t, text(s, R_SCN));
        tab_add(t, text(s, R_GRID));
        if (variant)
            tab_add(t, vr);
    }
    return !ok;
}

static int runs_table(rep *R, table *t, int *n_failed)
{
    char *sql = sqlite3_mprintf(RUN_SELECT, R->where, R->order);
    sqlite3_stmt *s = NULL, *m = NULL;
    int rc = sql && sqlite3_prepare_v2(R->h, sql, -1, &s, NULL) == SQLITE_OK &&
                     sqlite3_prepare_v2(R->h,
                                        "SELECT value FROM metrics WHERE run_id = ?1 AND "
                                        "name = ?2",
                                        -1, &m, NULL) == SQLITE_OK
                 ? 0
                 : -1;
    sqlite3_free(sql);
    int variant = dbvar_keys(R->var)[0] != '\0';
    if (!rc)
        runs_columns(R, t, variant);
    *n_failed = 0;
    while (!rc && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = 0;
        *n_failed += run_row(R, t, s, m, variant);
        t->rows++;
    }
    if (rc == SQLITE_DONE)
        rc = 0;
    sqlite3_finalize(s);
    sqlite3_finalize(m);
    return rc || t->oom ? -1 : 0;
}

/* Failed runs and why: the error text wrapped under each run. */
static int failed_list(rep *R, FILE *f)
{
    char *sql = sqlite3_mprintf(RUN_SELECT, R->where, R->order);
    sqlite3_stmt *s = NULL;
    if (!sql || sqlite3_prepare_v2(R->h, sql, -1, &s, NULL) != SQLITE_OK) {
        sqlite3_free(sql);
        return -1;
    }
    sqlite3_free(sql);
    int n = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!strcmp(text(s, R_STATUS), "ok"))
            continue;
        char head[1024];
        const char *vr = dbvar_of(R->var, sqlite3_column_int64(s, R_ID));
        snprintf(head, sizeof head, "run %s (grid point %s of %s, %s): %s %s %s %s P=%s D=%s%s%s",
                 text(s, R_ID), text(s, R_GRID), text(s, R_SCN), text(s, R_HASH), text(s, R_MODEL),
                 text(s, R_PROTO), text(s, R_NET), text(s, R_LABEL), text(s, R_PROMPT),
                 text(s, R_DECODE), vr[0] ? " " : "", vr);
        fputs(n++ ? "\n" : "", f);
        dbq_wrap(f, head, R->width);
        /* the message, wrapped at the width with a two-space indent */
        char line[2048];
        snprintf(line, sizeof line, "  %s", text(s, R_ERROR));
        dbq_wrap(f, line, R->width);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return -1;
    if (!n)
        fprintf(f, "no failed runs\n");
    else {
        char line[160];
        snprintf(line, sizeof line,
                 "\n%d failed run%s (`mpcsim run SCENARIO --resume` tries "
                 "them again)",
                 n, n == 1 ? "" : "s");
        dbq_wrap(f, line, R->width);
    }
    return 0;
}

/* ---- serving tables -------------------------------------------------------------------- */

static int has_table(sqlite3 *h, const char *name)
{
    sqlite3_stmt *s;
    int yes = 0;
    if (sqlite3_prepare_v2(h,
                           "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                           "name = ?1",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        yes = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0;
    }
    sqlite3_finalize(s);
    return yes;
}

#define SERVE_METRIC(name) \
    ", (SELECT value FROM serve_metrics m WHERE m.run_id = r.id AND m.name = '" name "')"
static const char serve_sql[] =
    "SELECT r.id, r.scenario, r.policy, r.model, r.protocol, r.network, r.scheduler, r.rate, "
    "r.n_requests" SERVE_METRIC("ttft_p50") SERVE_METRIC("ttft_p99") SERVE_METRIC("tpot_mean")
        SERVE_METRIC("token_hit_rate") SERVE_METRIC("online_bytes") SERVE_METRIC(
            "throughput_tokens") " FROM serve_runs r ORDER BY r.scenario, r.policy, r.rate, r.id";
static const char leak_sql[] =
    "SELECT id, scenario, policy, channel, scheduler, trials, success_rate, chance, p_value, "
    "bits FROM serve_leak ORDER BY scenario, policy, id";

static void per_hour(char *out, size_t n, double rate) { snprintf(out, n, "%.4g/h", rate * 3600); }
static void share(char *out, size_t n, double v) { snprintf(out, n, "%.3f", v); }

/* A serving table under its heading, as CSV or fitted to the width; nothing when empty. */
static void serve_print(const rep *R, table *t, const char *heading, size_t shared, FILE *f)
{
    if (!t->rows)
        return;
    if (R->fmt == RF_MARKDOWN || R->fmt == RF_LATEX) {
        fprintf(f, R->fmt == RF_MARKDOWN ? "\n**%s**\n\n" : "\n%% %s\n", heading);
        tab_paper(t, R->fmt, shared, 0, t->rows, f);
        return;
    }
    fprintf(f, "\n%s\n", heading);
    if (R->csv)
        tab_csv(t, f);
    else
        tab_print(t, R->width, shared, 0, t->rows, f);
}

/* serve_runs: a row per serving run with its main metrics. 0, or -1 (SQLite error or out of
 * memory). */
static int serve_runs_table(rep *R, FILE *f)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(R->h, serve_sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    table t = {0};
    static const char *const head[] = {
        "id",       "scenario", "sharing",  "model", "protocol",   "network", "scheduler", "load",
        "requests", "ttft p50", "ttft p99", "tpot",  "token hits", "online",  "tok/s"};
    static const int prio[] = {1, 2, 1, 3, 3, 3, 4, 1, 4, 1, 2, 2, 1, 3, 4};
    for (size_t c = 0; c < sizeof head / sizeof *head; c++)
        tab_col(&t, head[c], prio[c], c == 0 || c >= 7);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (int c = 0; c < 7; c++)
            tab_add(&t, text(s, c));
        cell_num(&t, s, 7, R->csv, per_hour);
        tab_add(&t, text(s, 8));
        for (int c = 9; c < 12; c++)
            cell_num(&t, s, c, R->csv, dbq_seconds);
        cell_num(&t, s, 12, R->csv, share);
        cell_num(&t, s, 13, R->csv, dbq_bytes);
        cell_num(&t, s, 14, R->csv, NULL);
        t.rows++;
    }
    sqlite3_finalize(s);
    int ok = rc == SQLITE_DONE && !t.oom;
    if (ok)
        serve_print(R, &t, "serving runs (mpcsim serve)", 7, f);
    tab_free(&t);
    return ok ? 0 : -1;
}

/* serve_leak, when present: the timing attacks on the sharing policies. 0, or -1 (SQLite
 * error). */
static int serve_leak_table(rep *R, FILE *f)
{
    if (!has_table(R->h, "serve_leak"))
        return 0;
    sqlite3_stmt *s;
    table l = {0};
    static const char *const lh[] = {"id",     "scenario", "sharing", "channel", "scheduler",
                                     "trials", "success",  "chance",  "p-value", "bits"};
    for (size_t c = 0; c < sizeof lh / sizeof *lh; c++)
        tab_col(&l, lh[c], c < 4 || c == 6 ? 1 : 3, c == 0 || c >= 5);
    if (sqlite3_prepare_v2(R->h, leak_sql, -1, &s, NULL) != SQLITE_OK) {
        tab_free(&l);
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (int c = 0; c < 6; c++)
            tab_add(&l, text(s, c));
        for (int c = 6; c < 10; c++)
            cell_num(&l, s, c, R->csv, NULL);
        l.rows++;
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_DONE && !l.oom)
        serve_print(R, &l, "timing attacks on the sharing policies", 5, f);
    tab_free(&l);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* The tables `mpcsim serve` writes, when the database has them. 0, or -1. */
static int serve_tables(rep *R, FILE *f)
{
    if (!has_table(R->h, "serve_runs"))
        return 0;
    return serve_runs_table(R, f) ? -1 : serve_leak_table(R, f);
}

/* ---- JSON ------------------------------------------------------------------------------ */

/* A column as JSON: NULL → null, numbers → numbers, text → string (NULL if not UTF-8). JSON
 * has no infinity or NaN: such a value is null, and a note says which value it was. */
static json_t *col_json(rep *R, sqlite3_stmt *s, int c, const char *key, sqlite3_int64 id,
                        const char *name)
{
    switch (sqlite3_column_type(s, c)) {
    case SQLITE_NULL: return json_null();
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(s, c));
    case SQLITE_FLOAT: {
        double v = sqlite3_column_double(s, c);
        if (isfinite(v))
            return json_real(v);
        char note[256];
        snprintf(note, sizeof note, "%s id %lld: %s is %s, written as null", key, (long long)id,
                 name,
                 isnan(v) ? "nan"
                 : v > 0  ? "inf"
                          : "-inf");
        if (json_array_append_new(R->notes, json_string(note)))
            return NULL;
        return json_null();
    }
    default: return json_string(text(s, c));
    }
}

/* Every row of a query as an object keyed by the column names; a column named "metrics"
 * … none: child rows are added by the caller. */
static int set_cols(rep *R, const char *key, json_t *o, sqlite3_stmt *s, int from, int to)
{
    for (int c = from; c < to; c++) {
        json_t *v = col_json(R, s, c, key, sqlite3_column_int64(s, 0), sqlite3_column_name(s, c));
        if (!v || json_object_set_new(o, sqlite3_column_name(s, c), v))
            return -1;
    }
    return 0;
}

static json_t *metrics_json(rep *R, const char *key, const char *mtable, sqlite3_int64 id)
{
    sqlite3 *h = R->h;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT name, value FROM %s WHERE run_id = ?1 ORDER BY name", mtable);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_int64(s, 1, id);
    json_t *o = json_object();
    while (o && sqlite3_step(s) == SQLITE_ROW)
        if (json_object_set_new(o, text(s, 0), col_json(R, s, 1, key, id, text(s, 0)))) {
            json_decref(o);
            o = NULL;
        }
    sqlite3_finalize(s);
    return o;
}

static int rows_json(rep *R, json_t *root, const char *key, const char *sql, const char *mtable)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(R->h, sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    json_t *a = json_array();
    int rc = 0, st;
    while (!rc && (st = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *o = json_object();
        int nc = sqlite3_column_count(s);
        int jc = -1;
        for (int c = 0; c < nc; c++)
            if (!strcmp(sqlite3_column_name(s, c), "config_json"))
                jc = c;
        rc = !o || set_cols(R, key, o, s, 0, jc >= 0 ? jc : nc);
        if (!rc && jc >= 0) { /* the resolved config, as an object */
            json_error_t je;
            json_t *cfg = sqlite3_column_type(s, jc) == SQLITE_NULL
                              ? json_null()
                              : json_loads(text(s, jc), 0, &je);
            rc =
                !cfg || json_object_set_new(o, "config", cfg) || set_cols(R, key, o, s, jc + 1, nc);
        }
        if (!rc && mtable) {
            json_t *m = metrics_json(R, key, mtable, sqlite3_column_int64(s, 0));
            rc = !m || json_object_set_new(o, "metrics", m);
        }
        if (!rc)
            rc = json_array_append_new(a, o);
        else
            json_decref(o);
    }
    sqlite3_finalize(s);
    if (!rc)
        rc = json_object_set_new(root, key, a);
    else
        json_decref(a);
    return rc ? -1 : 0;
}

static int report_json(rep *R, FILE *f)
{
    char *sql = sqlite3_mprintf(
        "SELECT r.id, r.scenario, r.grid_index, r.config_hash, r.status, r.error, r.model, "
        "r.protocol, r.protocol_label, r.network, r.latency_ms, r.bandwidth_mbps, r.machine, "
        "r.threads, r.policy, "
        "r.policy_label, r.policy_cost, r.prompt_len, r.decode_len, r.batch, r.seed, r.started, "
        "r.finished, r.wall_s, r.tool_version, r.config_json, "
        "(SELECT sum(latency_ns) FROM phases p WHERE p.run_id = r.id) / 1e9 AS latency_s, "
        "(SELECT sum(bytes_p0 + bytes_p1 + bytes_p2) FROM breakdown b WHERE b.run_id = r.id "
        "AND b.category = 'total') AS online_bytes, "
        "(SELECT sum(offline_p0 + offline_p1 + offline_p2) FROM breakdown b WHERE b.run_id = "
        "r.id AND b.category = 'total') AS offline_bytes, "
        "(SELECT sum(rounds) FROM breakdown b WHERE b.run_id = r.id AND b.category = 'total') "
        "AS rounds FROM runs r WHERE 1 %s ORDER BY r.id",
        R->where);
    json_t *root = json_object();
    R->notes = json_array();
    int rc = !sql || !root || !R->notes;
    if (!rc)
        rc = json_object_set_new(root, "database", json_string(R->path)) ||
             json_object_set_new(root, "schema_version", json_integer(RDB_SCHEMA_VERSION));
    if (!rc)
        rc = rows_json(R, root, "runs", sql, "metrics");
    sqlite3_free(sql);
    if (!rc && has_table(R->h, "serve_runs"))
        rc = rows_json(R, root, "serve_runs", "SELECT * FROM serve_runs ORDER BY id",
                       "serve_metrics");
    if (!rc && has_table(R->h, "serve_leak"))
        rc = rows_json(R, root, "serve_leak", "SELECT * FROM serve_leak ORDER BY id", NULL);
    if (!rc && json_array_size(R->notes))
        rc = json_object_set(root, "notes", R->notes);
    json_decref(R->notes);
    R->notes = NULL;
    if (!rc)
        rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0;
    if (!rc)
        fputc('\n', f);
    json_decref(root);
    return rc ? -1 : 0;
}

/* ---- the command ----------------------------------------------------------------------- */

/* 0 ok, -1 --help printed, 2 usage error (printed). */
static int report_parse(int argc, char **argv, rep *R, const char **list, cli_list *where)
{
    int cols = 0, fmt = -1, order = 0;
    const cli_opt opts[] = {
        {.name = "failed",
         .kind = CLI_FLAG,
         .dest = &R->failed,
         .help = "the failed runs and their error messages"},
        {.name = "json",
         .kind = CLI_FLAG,
         .dest = &R->json,
         .help = "everything as one JSON object (raw numbers: s, B)"},
        {.name = "csv",
         .kind = CLI_FLAG,
         .dest = &R->csv,
         .help = "comma-separated values, every column and metric, raw\nnumbers (as --format csv)"},
        {.name = "format",
         .kind = CLI_CHOICE,
         .dest = &fmt,
         .arg = "F",
         .choices = "text|csv|json|markdown|latex",
         .help = "text (default), csv, json, or a table for a paper:\nmarkdown, latex (booktabs)"},
        {.name = "order",
         .kind = CLI_CHOICE,
         .dest = &order,
         .arg = "KEY",
         .choices = "family|scenario",
         .help = "rows by policy family then budget (default), or as the\nscenario lists them"},
        {.name = "columns",
         .kind = CLI_INT,
         .dest = &cols,
         .arg = "N",
         .lo = 20,
         .hi = 10000,
         .want = "a width from 20 to 10000",
         .help = "output width (default: the terminal's; 80 when stdout is\nnot a terminal)"},
        {.name = "metrics",
         .kind = CLI_STR,
         .dest = list,
         .arg = "LIST",
         .help = "metric columns to show instead of the accuracy metrics\n"
                 "(comma-separated names from the metrics table)"},
        {.name = "where",
         .kind = CLI_LIST,
         .dest = where,
         .arg = "K=V",
         .help = "only runs whose column or config value K is V (V1,V2: any\n"
                 "of them); K: model, protocol, network, policy,\n"
                 "policy_label, prompt_len, decode_len, … or a config path\n"
                 "such as workload.decode_stride; repeat to narrow further"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"report", opts, sizeof opts / sizeof opts[0], 22, 2};
    const char *pos[2];
    int n_pos = 0, rc = cli_parse_cmd(&cmd, argc, argv, pos, &n_pos, report_usage);
    if (rc)
        return rc == CLI_HELP_ASKED ? -1 : rc;
    if (R->csv + R->json + (fmt >= 0) > 1) {
        cli_error("report", "--csv, --json and --format exclude each other");
        return 2;
    }
    R->fmt = fmt >= 0 ? (rep_format)fmt : R->csv ? RF_CSV : R->json ? RF_JSON : RF_TEXT;
    R->csv = R->fmt == RF_CSV;
    R->json = R->fmt == RF_JSON;
    R->order = order ? ORDER_SCENARIO : ORDER_FAMILY;
    if ((rc = cli_want_one(&cmd, n_pos, "no database given", "one database only", report_usage)))
        return rc;
    R->path = pos[0];
    R->width = dbq_columns(cols);
    return 0;
}

/* The policies of the runs shown whose MPC cost is declared, not checked against their
 * selection: as the run's writer judged it (runs.policy_cost, where a composition or a plug-in
 * was loaded), else, for a run stored before that column, by name here (sim/policy/pcheck.h;
 * a composition or a plug-in is not loaded here: declared). */
static void declared_note(const rep *R, FILE *f)
{
    char *sql = sqlite3_mprintf("SELECT r.policy, max(r.policy_cost = 'declared') FROM runs r "
                                "WHERE r.policy_cost IN ('declared', '') %s GROUP BY 1 ORDER BY 1",
                                R->where);
    sqlite3_stmt *s = NULL;
    if (!sql || sqlite3_prepare_v2(R->h, sql, -1, &s, NULL) != SQLITE_OK) {
        sqlite3_free(sql);
        return;
    }
    sqlite3_free(sql);
    char line[1200] = "";
    size_t k = 0, n = 0;
    while (sqlite3_step(s) == SQLITE_ROW && k < sizeof line - 64) {
        const char *nm = (const char *)sqlite3_column_text(s, 0);
        if (!nm || (!sqlite3_column_int(s, 1) && pcheck_cost_of(policy_find(nm)) != PCOST_DECLARED))
            continue;
        k += (size_t)snprintf(line + k, sizeof line - k, "%s%s", n++ ? ", " : "", nm);
    }
    sqlite3_finalize(s);
    if (!n)
        return;
    char msg[1400];
    snprintf(msg, sizeof msg,
             "cost declared: %s (the MPC cost of %s selection is what its ops state, not checked "
             "against it: mpcsim policy check)",
             line, n == 1 ? "its" : "their");
    dbq_wrap(f, msg, R->width);
}

int cmd_report(int argc, char **argv)
{
    rep R = {0};
    const char *list = NULL, *where[DBQ_MAX_WHERE];
    cli_list wl = {where, 0, DBQ_MAX_WHERE};
    int st = report_parse(argc, argv, &R, &list, &wl);
    if (st)
        return st < 0 ? 0 : st;
    rdb *db;
    if ((st = dbq_open("report", R.path, where, wl.n, &R.where, &db)))
        return st;
    R.h = rdb_handle(db);
    if (!R.json && dbvar_build(R.h, RUN_IDENT, NULL, R.where, 0, &R.var)) {
        cli_error("report", "%s: reading the runs' configurations: %s", R.path,
                  sqlite3_errmsg(R.h));
        free(R.where);
        rdb_close(db);
        return 1;
    }
    table t = {0};
    int n_failed = 0;
    if (R.json) {
        if (report_json(&R, stdout))
            st = 1;
    } else if (R.failed) {
        if (failed_list(&R, stdout))
            st = 1;
    } else if (!(st = pick_metrics(R.h, list, R.csv, R.mcols, &R.nm))) {
        R.asked = list != NULL;
        if (runs_table(&R, &t, &n_failed))
            st = 1;
        else if (R.csv)
            tab_csv(&t, stdout);
        else if (R.fmt == RF_MARKDOWN || R.fmt == RF_LATEX)
            tab_by_model(&t, R.fmt, R.width, dbvar_keys(R.var)[0] ? 10 : 9, stdout);
        else {
            if (t.rows)
                tab_by_model(&t, RF_TEXT, R.width, dbvar_keys(R.var)[0] ? 10 : 9, stdout);
            char line[1200];
            int k = snprintf(line, sizeof line, "%zu run%s", t.rows, t.rows == 1 ? "" : "s");
            if (n_failed)
                snprintf(line + k, sizeof line - (size_t)k,
                         ", %d failed (why: mpcsim report %s --failed)", n_failed, R.path);
            dbq_wrap(stdout, line, R.width);
            declared_note(&R, stdout);
        }
        if (!st && serve_tables(&R, stdout))
            st = 1;
    }
    if (st == 1)
        cli_error("report", "%s: %s", R.path, sqlite3_errmsg(R.h));
    tab_free(&t);
    free(R.where);
    dbvar_free(R.var);
    rdb_close(db);
    return st;
}

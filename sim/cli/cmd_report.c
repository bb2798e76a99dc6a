/* cmd_report.c — `mpcsim report`: the runs of a results database as an aligned table (or CSV):
 * what was run, what it cost, and the accuracy metrics it measured. */
#include <getopt.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "results/rdb.h"

#define REP_MAX_METRICS 32

static void report_usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim report DB [--metrics a,b,...] [--csv]\n\n"
            "Prints one row per run: model, protocol, network, policy, prompt and decode\n"
            "lengths, latency (prefill, decode, total), online bytes, offline bytes, rounds,\n"
            "and the accuracy metrics present (recall, error, KL, agreement, perplexity).\n\n"
            "options:\n"
            "      --metrics LIST  metric columns to show instead of the accuracy metrics\n"
            "                      (comma-separated names from the metrics table)\n"
            "      --csv           comma-separated values with raw numbers (seconds, bytes)\n"
            "  -h, --help          this help\n\n"
            "exit status: 0 ok, 1 database error, 2 bad usage or unknown metric\n");
}

/* ---- a table of text cells, printed aligned or as CSV ----------------------------------- */

typedef struct table {
    char **cell; /* row-major, row 0 is the header */
    size_t n, rows, cols, cap;
    int oom;
} table;

static void tab_add(table *t, const char *s)
{
    if (t->oom)
        return;
    if (t->n + 1 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        char **c = realloc(t->cell, cap * sizeof *c);
        if (!c) {
            t->oom = 1;
            return;
        }
        t->cell = c;
        t->cap = cap;
    }
    if (!(t->cell[t->n] = strdup(s ? s : "")))
        t->oom = 1;
    else
        t->n++;
}

static void tab_free(table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->cell[i]);
    free(t->cell);
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void tab_print(const table *t, int csv, FILE *f)
{
    size_t w[64] = {0};
    for (size_t r = 0; r < t->rows; r++)
        for (size_t c = 0; c < t->cols && c < 64; c++) {
            size_t len = strlen(t->cell[r * t->cols + c]);
            w[c] = len > w[c] ? len : w[c];
        }
    for (size_t r = 0; r < t->rows; r++) {
        for (size_t c = 0; c < t->cols; c++) {
            const char *s = t->cell[r * t->cols + c];
            if (csv) {
                if (c)
                    fputc(',', f);
                csv_field(f, s);
            } else { /* text left, numbers right */
                int left = c < 6 || r == 0;
                fprintf(f, "%s%*s%s", c ? "  " : "", left ? -(int)w[c] : (int)w[c], s, "");
            }
        }
        fputc('\n', f);
        if (!csv && r == 0) {
            for (size_t c = 0; c < t->cols; c++)
                for (size_t k = 0; k < w[c] + (c ? 2 : 0); k++)
                    fputc(c && k < 2 ? ' ' : '-', f);
            fputc('\n', f);
        }
    }
}

/* ---- formatting ------------------------------------------------------------------------ */

static void fmt_bytes(char *out, size_t n, double b, int csv)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    if (csv) {
        snprintf(out, n, "%.0f", b);
        return;
    }
    while (b >= 1000 && u < 5) {
        b /= 1000;
        u++;
    }
    snprintf(out, n, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
}

static void fmt_num(char *out, size_t n, double v, int csv)
{
    snprintf(out, n, csv ? "%.17g" : "%.4g", v);
}

/* ---- which metric columns -------------------------------------------------------------- */

/* Metric names stored in the database (sorted). */
static int metric_names(sqlite3 *h, char names[][48], size_t max, size_t *n)
{
    sqlite3_stmt *s;
    *n = 0;
    if (sqlite3_prepare_v2(h, "SELECT DISTINCT name FROM metrics ORDER BY name", -1, &s, NULL))
        return -1;
    while (sqlite3_step(s) == SQLITE_ROW && *n < max)
        snprintf(names[(*n)++], 48, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return 0;
}

/* Fills cols from --metrics (checked against the stored names) or the accuracy metrics. */
static int pick_metrics(sqlite3 *h, const char *list, char cols[][48], size_t *nc)
{
    char have[256][48];
    size_t nh;
    *nc = 0;
    if (metric_names(h, have, 256, &nh))
        return 1;
    if (!list) {
        for (size_t i = 0; i < nh && *nc < REP_MAX_METRICS; i++)
            if (rdb_metric_is_accuracy(have[i]))
                snprintf(cols[(*nc)++], 48, "%.47s", have[i]);
        return 0;
    }
    const char *cand[256];
    for (size_t i = 0; i < nh; i++)
        cand[i] = have[i];
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
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

/* ---- the query ------------------------------------------------------------------------- */

static const char *const fixed_cols[] = {
    "id", "model", "protocol", "network", "policy", "status", "prompt", "decode",
    "prefill_s", "decode_s", "latency_s", "online", "offline", "rounds"};
#define N_FIXED (sizeof fixed_cols / sizeof fixed_cols[0])

static const char *const run_sql =
    "SELECT r.id, r.model, r.protocol, r.network, r.policy, r.status, r.prompt_len, "
    "r.decode_len, "
    "(SELECT latency_ns FROM phases p WHERE p.run_id = r.id AND p.phase = 'prefill'), "
    "(SELECT latency_ns FROM phases p WHERE p.run_id = r.id AND p.phase = 'decode'), "
    "(SELECT sum(latency_ns) FROM phases p WHERE p.run_id = r.id), "
    "(SELECT sum(bytes_p0 + bytes_p1 + bytes_p2) FROM breakdown b WHERE b.run_id = r.id "
    "  AND b.category = 'total'), "
    "(SELECT sum(offline_p0 + offline_p1 + offline_p2) FROM breakdown b WHERE b.run_id = r.id "
    "  AND b.category = 'total'), "
    "(SELECT sum(rounds) FROM breakdown b WHERE b.run_id = r.id AND b.category = 'total') "
    "FROM runs r ORDER BY r.model, r.protocol, r.network, r.policy, r.prompt_len, "
    "r.decode_len, r.id";

static void add_run_cells(table *t, sqlite3_stmt *s, int csv)
{
    char buf[64];
    for (int c = 0; c < 8; c++)
        tab_add(t, (const char *)sqlite3_column_text(s, c));
    for (int c = 8; c < 11; c++) { /* latencies, ns → s */
        if (sqlite3_column_type(s, c) == SQLITE_NULL)
            snprintf(buf, sizeof buf, "%s", csv ? "" : "-");
        else
            fmt_num(buf, sizeof buf, 1e-9 * sqlite3_column_double(s, c), csv);
        tab_add(t, buf);
    }
    for (int c = 11; c < 13; c++) {
        if (sqlite3_column_type(s, c) == SQLITE_NULL)
            snprintf(buf, sizeof buf, "%s", csv ? "" : "-");
        else
            fmt_bytes(buf, sizeof buf, sqlite3_column_double(s, c), csv);
        tab_add(t, buf);
    }
    tab_add(t, sqlite3_column_type(s, 13) == SQLITE_NULL ? (csv ? "" : "-")
                                                          : (const char *)sqlite3_column_text(s, 13));
}

static int build_table(sqlite3 *h, char mcols[][48], size_t nm, int csv, table *t)
{
    sqlite3_stmt *s, *m;
    if (sqlite3_prepare_v2(h, run_sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_prepare_v2(h, "SELECT value FROM metrics WHERE run_id = ?1 AND name = ?2", -1,
                           &m, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return -1;
    }
    t->cols = N_FIXED + nm;
    for (size_t c = 0; c < N_FIXED; c++)
        tab_add(t, fixed_cols[c]);
    for (size_t c = 0; c < nm; c++)
        tab_add(t, mcols[c]);
    t->rows = 1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        add_run_cells(t, s, csv);
        for (size_t c = 0; c < nm; c++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", csv ? "" : "-");
            sqlite3_reset(m);
            sqlite3_bind_int64(m, 1, sqlite3_column_int64(s, 0));
            sqlite3_bind_text(m, 2, mcols[c], -1, SQLITE_STATIC);
            if (sqlite3_step(m) == SQLITE_ROW)
                fmt_num(buf, sizeof buf, sqlite3_column_double(m, 0), csv);
            tab_add(t, buf);
        }
        t->rows++;
    }
    sqlite3_finalize(s);
    sqlite3_finalize(m);
    return rc == SQLITE_DONE && !t->oom ? 0 : -1;
}

/* ---- the command ----------------------------------------------------------------------- */

int cmd_report(int argc, char **argv)
{
    static const struct option lo[] = {{"metrics", required_argument, NULL, 'm'},
                                       {"csv", no_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    const char *list = NULL;
    int csv = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': list = optarg; break;
        case 'c': csv = 1; break;
        case 'h': report_usage(stdout); return 0;
        default: report_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        cli_error("report", optind >= argc ? "no database given" : "one database only");
        report_usage(stderr);
        return 2;
    }
    rdb *db;
    errbuf e;
    int rc = rdb_open(argv[optind], 0, &db, &e);
    if (rc) {
        cli_error("report", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    sqlite3 *h = rdb_handle(db);
    char mcols[REP_MAX_METRICS][48];
    size_t nm = 0;
    table t = {0};
    int st = pick_metrics(h, list, mcols, &nm);
    if (!st && build_table(h, mcols, nm, csv, &t)) {
        cli_error("report", "%s:%d: %s: %s", __FILE__, __LINE__, argv[optind], sqlite3_errmsg(h));
        st = 1;
    }
    if (!st)
        tab_print(&t, csv, stdout);
    if (!st && !csv) {
        sqlite3_stmt *f;
        long long failed = 0;
        if (sqlite3_prepare_v2(h, "SELECT count(*) FROM runs WHERE status = 'failed'", -1, &f,
                               NULL) == SQLITE_OK && sqlite3_step(f) == SQLITE_ROW)
            failed = sqlite3_column_int64(f, 0);
        sqlite3_finalize(f);
        printf("%zu run%s", t.rows - 1, t.rows == 2 ? "" : "s");
        if (failed)
            printf(", %lld failed (why: SELECT grid_index, error FROM runs WHERE status = "
                   "'failed')", failed);
        putchar('\n');
    }
    tab_free(&t);
    rdb_close(db);
    return st;
}

/* check_cli_out.c — what a user reads from a database: `mpcsim report` tables (every metric,
 * family and budget order, 80 columns, CSV, Markdown, LaTeX) and `mpcsim plot` images and
 * figures from databases the tests build. */
#include <check.h>
#include <ctype.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocols/program/op.h"
#include "results/rdb.h"
#include "harness.h"
#include "clifix.h"
#include "sqlfix.h"

TESTDIR("check_cli_out")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* ---- running the CLI ------------------------------------------------------------------- */

/* Names the output files of the next spawns: out<tag>.txt, err<tag>.txt. */
static const char *spawn_tag = "";

/* out<tag>.txt, err<tag>.txt in the test folder. */
static const char *tagged(const char *base)
{
    char name[32];
    snprintf(name, sizeof name, "%s%s.txt", base, spawn_tag);
    return tpath(name);
}

/* `mpcsim args…` in tmpdir, stdout/stderr to out<tag>.txt/err<tag>.txt. */
#define MPCSIM(...) th_runl(tmpdir, tagged("out"), tagged("err"), __VA_ARGS__, (const char *)NULL)
#define SPAWN(...) th_spawnl(tmpdir, tagged("out"), tagged("err"), __VA_ARGS__, (const char *)NULL)

/* The cell under head in the CSV row `row` of the CSV text csv (a pointer into row; the heads
 * have no quotes). */
static const char *csv_cell(const char *csv, const char *row, const char *head)
{
    int want = -1, col = 0;
    for (const char *p = csv, *e; want < 0 && *p && *p != '\n'; p = *e == ',' ? e + 1 : e, col++) {
        e = p + strcspn(p, ",\n");
        if ((size_t)(e - p) == strlen(head) && !strncmp(p, head, (size_t)(e - p)))
            want = col;
    }
    ck_assert_msg(want >= 0, "no column %s", head);
    for (col = 0; col < want; col++) {
        if (*row == '"') /* a quoted cell: to its closing quote ("" is a quote) */
            for (row++; *row && !(row[0] == '"' && row[1] != '"'); row += 1 + (*row == '"'))
                ;
        row += strcspn(row, ",\n");
        ck_assert_int_eq(*row, ',');
        row++;
    }
    return row;
}

START_TEST(test_report)
{
    clifix_write_sweep(tpath("r.yaml"), "rep", 2, 0); /* 8 runs */
    ck_assert_int_eq(MPCSIM("run", "r.yaml", "-o", "r.db", "-q"), 0);
    ck_assert_int_eq(MPCSIM("report", "r.db"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "latency"));
    ck_assert_ptr_nonnull(strstr(out, "policy"));
    ck_assert_ptr_nonnull(strstr(out, "8 runs"));
    ck_assert_int_eq(th_count(out, " wan "), 4);
    ck_assert_int_eq(th_count(out, " aby3 "), 4);
    /* aligned: every run line as wide as the header (after the shared columns' line) */
    char *line = out;
    if (!strncmp(line, "all runs:", 9))
        line += strcspn(line, "\n") + 1;
    size_t w = strcspn(line, "\n");
    for (int i = 0; i < 9; i++) {
        size_t lw = strcspn(line, "\n");
        ck_assert_uint_eq(lw, w);
        line += lw + 1;
    }
    free(out);
    ck_assert_int_eq(MPCSIM("report", "r.db", "--csv"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_int_eq(th_count(out, "\n"), 9);
    ck_assert(!strncmp(out, "id,model,protocol,network,policy,policy_label", 45));
    /* latency in CSV equals the phases' sum in the database, for the first row's run */
    char *row = strchr(out, '\n') + 1, sql[160];
    snprintf(sql, sizeof sql, "SELECT sum(latency_ns) FROM phases WHERE run_id = %lld",
             strtoll(row, NULL, 10));
    double lat = (double)sqlfix_file_int(tpath("r.db"), sql) * 1e-9;
    ck_assert_double_gt(lat, 0);
    ck_assert_double_eq_tol(strtod(csv_cell(out, row, "latency_s"), NULL), lat, 1e-9 * lat);
    free(out);
    ck_assert_int_eq(MPCSIM("report", "r.db", "--metrics", "no_such_metric"), 2);
}
END_TEST

/* report on a sweep of policies: rows by family then budget (or the scenario's order), the
 * metrics asked for never left out at 80 columns, CSV with every metric and the family apart
 * from the label, Markdown and LaTeX tables, and runs_wide with every run metric. */
static const char policies_yaml[] =
    "format: 1\nname: pol\nseed: 1\nprotocol: semi2k\nnetwork: lan\n"
    "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256, "
    "max_context: 512}\n"
    "workload: {prompt_len: 64, decode_len: 4}\ntrace: {source: synth}\n"
    "policies:\n"
    "  - {name: h2o, heavy_ratio: 0.2, recent_ratio: 0.2}\n"
    "  - {name: streamingllm, sink: 4, recent: 16}\n"
    "  - full\n"
    "  - {name: h2o, heavy_ratio: 0.05, recent_ratio: 0.05}\n"
    "  - {name: streamingllm, sink: 4, recent: 4}\n";

START_TEST(test_report_policies)
{
    th_write(tpath("pol.yaml"), policies_yaml);
    ck_assert_int_eq(MPCSIM("run", "pol.yaml", "-o", "pol.db", "-q"), 0);
    char db[4096];
    snprintf(db, sizeof db, "%s", tpath("pol.db"));
    /* CSV: every metric the database holds is a column; family and label apart */
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--csv"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    char *head = strndup(out, strcspn(out, "\n"));
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT DISTINCT name FROM metrics", -1, &st, NULL),
                     SQLITE_OK);
    int names = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char col[64];
        snprintf(col, sizeof col, ",%s,", (const char *)sqlite3_column_text(st, 0));
        ck_assert_msg(strstr(head, col), "CSV lacks %s: %s", col, head);
        names++;
    }
    sqlite3_finalize(st);
    ck_assert_int_gt(names, 20);
    free(out);
    free(head);
    /* rows: full first, then each family by its kept fraction (ascending) */
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--csv"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    const char *want[] = {"full", "h2o", "h2o", "streamingllm", "streamingllm"};
    double prev = -1;
    const char *row = out + strcspn(out, "\n") + 1;
    for (int i = 0; i < 5; i++, row += strcspn(row, "\n") + 1) {
        const char *fam = csv_cell(out, row, "policy");
        ck_assert_msg(!strncmp(fam, want[i], strlen(want[i])) && fam[strlen(want[i])] == ',',
                      "row %d: %.40s", i, fam);
        double kept = strtod(csv_cell(out, row, "kept_frac"), NULL);
        if (i == 2 || i == 4)
            ck_assert_double_ge(kept, prev);
        prev = kept;
        ck_assert_ptr_nonnull(csv_cell(out, row, "policy_label"));
        ck_assert_double_eq(strtod(csv_cell(out, row, "latency_ms"), NULL), 0.1);
        ck_assert_double_gt(strtod(csv_cell(out, row, "bandwidth_mbps"), NULL), 0);
    }
    free(out);
    /* --order scenario: as the scenario lists them */
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--csv", "--order", "scenario"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    row = out + strcspn(out, "\n") + 1;
    for (long i = 0; i < 5; i++, row += strcspn(row, "\n") + 1)
        ck_assert_int_eq(strtol(csv_cell(out, row, "grid_index"), NULL, 10), i);
    free(out);
    /* 80 columns: the metrics asked for are all there, each run's value in its row */
    static const char *const asked[] = {"attn_mass_recall", "attn_out_wo_rel_err", "kept_frac",
                                        "topk_recall", "attn_out_rel_err"};
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--columns", "80", "--metrics",
                            "attn_mass_recall,attn_out_wo_rel_err,kept_frac,topk_recall,"
                            "attn_out_rel_err"),
                     0);
    out = th_slurp(tpath("out.txt"), NULL);
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0))
        ck_assert_msg(strcspn(l, "\n") <= 80, "over 80 columns:\n%s", out);
    const char *dropped = strstr(out, "not shown for the width");
    for (size_t a = 0; a < sizeof asked / sizeof *asked; a++) {
        ck_assert_msg(!dropped || !strstr(dropped, asked[a]), "%s dropped:\n%s", asked[a], out);
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT printf('%%.4g', value) FROM metrics WHERE name = '%s'",
                 asked[a]);
        ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW)
            ck_assert_msg(strstr(out, (const char *)sqlite3_column_text(st, 0)),
                          "no %s value %s in\n%s", asked[a], sqlite3_column_text(st, 0), out);
        sqlite3_finalize(st);
    }
    free(out);
    /* a paper's table */
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--format", "markdown", "--metrics", "kept_frac"),
                     0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "| id | policy |"));
    ck_assert_ptr_nonnull(strstr(out, "| kept_frac |\n| ---: | --- |"));
    ck_assert_int_eq(th_count(out, "\n| "), 7); /* the head, its rule and five runs */
    free(out);
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--format", "latex", "--metrics", "kept_frac"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "\\toprule\n"));
    ck_assert_ptr_nonnull(strstr(out, "kept\\_frac \\\\\n\\midrule\n"));
    ck_assert_ptr_nonnull(strstr(out, "\\bottomrule\n\\end{tabular}\n"));
    ck_assert_ptr_nonnull(strstr(out, "h2o(heavy\\_ratio=0.05,recent\\_ratio=0.05)"));
    free(out);
    ck_assert_int_eq(MPCSIM("report", "pol.db", "--format", "latex", "--csv"), 2);
    /* runs_wide: every run metric of the registry, the decode step's included */
    ck_assert_int_eq(
        sqlfix_file_int(db, "SELECT count(*) FROM runs_wide w JOIN metrics m ON m.run_id = w.id "
                            "AND m.name = 'bytes_decode_step' AND m.value = w.bytes_decode_step"),
        5);
    ck_assert_int_eq(
        sqlfix_file_int(db, "SELECT count(*) FROM runs_wide w JOIN metrics m ON m.run_id = w.id "
                            "AND m.name = 'latency_decode_step_s' AND "
                            "m.value = w.latency_decode_step_s"),
        5);
    sqlite3_close(h);
}
END_TEST

/* ---- plots from a database the test builds ---------------------------------------------- */

static void build_plot_db(const char *path, int with_accuracy)
{
    static const char *const nets[] = {"lan", "wan"}, *const pols[] = {"full", "h2o", "snapkv"};
    static const char *const cats[] = {"attention", "ffn", "softmax"};
    rdb *db = sqlfix_rdb_new(path);
    errbuf e;
    int idx = 0;
    for (int n = 0; n < 2; n++)
        for (int p = 0; p < 3; p++)
            for (uint32_t len = 128; len <= 1024; len *= 2, idx++) {
                char hash[17];
                snprintf(hash, sizeof hash, "%016x", 0x1000 + idx);
                double keep = p == 0 ? 1.0 : 0.3 + 0.2 * p;
                uint64_t lat = (uint64_t)(len * keep * (n ? 40e6 : 2e6));
                rdb_metric m[2] = {{"attn_mass_recall", p == 0 ? 1.0 : 0.7 + 0.1 * p, "ratio"},
                                   {"steps_simulated", 8, "steps"}};
                rdb_phase ph[2] = {{"prefill", lat / 4, 1}, {"decode", lat, 1}};
                rdb_breakdown bd[4] = {
                    {"decode",
                     "total",
                     {.rounds = 100, .bytes = {len * 1000000u, len * 900000u, 0}}}};
                for (int c = 0; c < 3; c++)
                    bd[c + 1] = (rdb_breakdown){"decode",
                                                cats[c],
                                                {.rounds = 10,
                                                 .bytes = {len * 100000u * (c + 1)},
                                                 .compute_ns = lat / 10,
                                                 .comm_ns = lat / (c + 2)}};
                rdb_run r = {.scenario = "plots",
                             .grid_index = (uint64_t)idx,
                             .config_hash = hash,
                             .config_yaml = "x\n",
                             .seed = 1,
                             .status = "ok",
                             .started = "t",
                             .finished = "t",
                             .tool_version = "test",
                             .model = "gpt2",
                             .protocol = "semi2k",
                             .network = nets[n],
                             .policy = pols[p],
                             .prompt_len = len,
                             .decode_len = 8,
                             .batch = 1,
                             .metric = m,
                             .n_metric = with_accuracy ? 2 : 1,
                             .phase = ph,
                             .n_phase = 2,
                             .breakdown = bd,
                             .n_breakdown = 4};
                if (!with_accuracy)
                    r.metric = m + 1;
                ck_assert_int_eq(rdb_run_put(db, &r, NULL, &e), MS_OK);
            }
    rdb_close(db);
}

/* A PNG: signature, IHDR chunk first, width and height > 0. */
static void check_png(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "missing %s", path);
    unsigned char h[24];
    ck_assert_uint_eq(fread(h, 1, 24, f), 24);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    ck_assert_msg(!memcmp(h, sig, 8), "%s: no PNG signature", path);
    ck_assert_msg(!memcmp(h + 12, "IHDR", 4), "%s: first chunk is not IHDR", path);
    unsigned w = (unsigned)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
    unsigned ht = (unsigned)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23];
    ck_assert_uint_gt(w, 0);
    ck_assert_uint_gt(ht, 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_gt(st.st_size, 2000); /* more than an empty canvas header */
}

/* An SVG: parses as XML (Python's xml.etree) with root element <svg>. */
static void check_svg(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as E; "
             "r = E.parse(sys.argv[1]).getroot(); sys.exit(0 if r.tag.split('}')[-1] == 'svg' "
             "else 1)\" '%s'",
             path);
    ck_assert_msg(system(cmd) == 0, "%s is not an XML document with root <svg>", path);
}

START_TEST(test_plot_images)
{
    static const char *const plots[] = {"latency", "comm", "breakdown", "pareto"};
    build_plot_db(tpath("p.db"), 1);
    ck_assert_int_eq(MPCSIM("plot", "p.db", "-o", "png"), 0);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(err[0] == '\0', "plot wrote to stderr: %s", err);
    free(err);
    char f[64];
    for (int i = 0; i < 4; i++) {
        snprintf(f, sizeof f, "png/%s.png", plots[i]);
        check_png(tpath(f));
    }
    ck_assert_int_eq(MPCSIM("plot", "p.db", "--svg"), 0); /* default folder: p-plots */
    for (int i = 0; i < 4; i++) {
        snprintf(f, sizeof f, "p-plots/%s.svg", plots[i]);
        check_svg(tpath(f));
    }
    /* without accuracy metrics: the Pareto plot is skipped with a note */
    build_plot_db(tpath("q.db"), 0);
    ck_assert_int_eq(MPCSIM("plot", "q.db", "-o", "q"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "skipping the Pareto plot"));
    free(out);
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "q/%s.png", plots[i]);
        check_png(tpath(f));
    }
    ck_assert(!th_exists(tpath("q/pareto.png")));
    /* an empty database: nothing to plot */
    rdb *db;
    errbuf e;
    ck_assert_int_eq(rdb_open(tpath("empty.db"), 1, &db, &e), MS_OK);
    rdb_close(db);
    ck_assert_int_eq(MPCSIM("plot", "empty.db"), 2);
}
END_TEST

/* The faceted figures of an eviction study, from a real sweep: one command each, fixed panel
 * sizes (a column per metric in the cost figure), a policy parameter as x, and clear errors. */
START_TEST(test_plot_figures)
{
    th_write(tpath("pol.yaml"), policies_yaml);
    ck_assert_int_eq(MPCSIM("run", "pol.yaml", "-o", "fig.db", "-q"), 0);
    ck_assert_int_eq(MPCSIM("plot", "fig.db", "--figure", "study", "-o", "figs", "--data", "figd"),
                     0);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(err[0] == '\0', "plot wrote to stderr: %s", err);
    free(err);
    static const char *const figs[] = {"accuracy-budget", "cost-budget", "pareto-step"};
    static const int widths[] = {440, 880, 440}; /* a column of fixed-size panels, or more */
    for (int i = 0; i < 3; i++) {
        char f[96];
        snprintf(f, sizeof f, "figs/%s.png", figs[i]);
        check_png(tpath(f));
        snprintf(f, sizeof f, "figd/%s.gp", figs[i]);
        char *gp = th_slurp(tpath(f), NULL);
        const char *size = strstr(gp, "size ");
        int w = 0;
        ck_assert(size && sscanf(size, "size %d,", &w) == 1);
        if (i == 1) /* two metrics: two columns of panels */
            ck_assert_int_eq(w, widths[i]);
        else /* one column, the canvas widened for the heading */
            ck_assert_int_ge(w, widths[i]);
        /* five configurations in the legend, full first */
        ck_assert_int_eq(th_count(gp, "NaN with linespoints"), 5);
        ck_assert_ptr_nonnull(strstr(gp, "title \"full\""));
        free(gp);
    }
    char *gp = th_slurp(tpath("figd/pareto-step.gp"), NULL);
    ck_assert_ptr_nonnull(strstr(gp, "with steps")); /* the front */
    free(gp);
    ck_assert_int_eq(
        MPCSIM("plot", "fig.db", "--y", "attn_mass_recall", "--x", "heavy_ratio", "-o", "figs"), 0);
    check_png(tpath("figs/attn_mass_recall-vs-heavy_ratio.png"));
    ck_assert_int_eq(MPCSIM("plot", "fig.db", "--y", "attn_mass_recall", "--x", "no_such"), 2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(err, "'no_such' is no axis here"));
    free(err);
    ck_assert_int_eq(MPCSIM("plot", "fig.db", "--figure", "budgte"), 2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(err, "did you mean 'budget'"));
    free(err);
    ck_assert_int_eq(MPCSIM("plot", "fig.db", "--figure", "budget", "--y", "kept_frac"), 2);
    ck_assert_int_eq(MPCSIM("plot", "fig.db", "--figure", "budget", "--row", "modle"), 2);
    /* the breakdown plot is of one decode step: its bars end at the decode's bytes per step */
    ck_assert_int_eq(
        MPCSIM("plot", "fig.db", "-o", "std", "--data", "stdd", "--where", "policy_label=full"), 0);
    gp = th_slurp(tpath("stdd/breakdown.gp"), NULL);
    ck_assert_ptr_nonnull(strstr(gp, "online bytes (kB)"));
    /* the bytes column (panel 1, 2): the longest bar's end, over its categories' blocks */
    double end = 0;
    for (const char *q = strstr(gp, "$b0_1_"); q; q = strstr(q + 1, "$b0_1_"))
        for (const char *l = strchr(q, '\n'); l && strncmp(l + 1, "EOD", 3);
             l = strchr(l + 1, '\n')) {
            double bar, start, stop;
            if (sscanf(l + 1, "%lf %lf %lf", &bar, &start, &stop) == 3)
                end = stop > end ? stop : end;
        }
    free(gp);
    /* one legend for the figure, under the panels: an entry per configuration (full only) */
    gp = th_slurp(tpath("stdd/latency.gp"), NULL);
    ck_assert_int_eq(th_count(gp, "# legend"), 1);
    ck_assert_int_eq(th_count(gp, "NaN with linespoints"), 1);
    free(gp);
    long long want = sqlfix_file_int(tpath("fig.db"),
                                     "SELECT sum(bytes_p0 + bytes_p1 + bytes_p2) / r.decode_len "
                                     "FROM breakdown b JOIN runs r ON r.id = b.run_id WHERE "
                                     "r.policy_label = 'full' AND b.phase = 'decode' AND "
                                     "b.category <> 'total'");
    ck_assert_double_eq_tol(end * 1e3, (double)want, 1.0);
}
END_TEST

Suite *cli_out_suite(void)
{
    Suite *s = suite_create("cli_out");
    TCase *tc = th_case(s, "outputs", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_report, test_report_policies, test_plot_images, test_plot_figures);
    return s;
}

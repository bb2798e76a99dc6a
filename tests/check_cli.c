/* check_cli.c — `mpcsim run|merge` driven as a user would ($MPCSIM_BIN): help and exit codes,
 * input errors that write nothing, dry runs, shards, a real SIGKILL mid-sweep and --resume,
 * determinism across runs and -j, merge; report tables and plot images are in
 * check_cli_out.c. */
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

TESTDIR("check_cli")
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

/* ---- scenarios ------------------------------------------------------------------------- */

/* ---- reading databases ----------------------------------------------------------------- */

/* Every result row, keyed by config hash, without ids, timestamps and wall times. */
static char *dump(const char *path)
{
    static const char *const sql[] = {
        "SELECT config_hash, scenario, grid_index, config_yaml, seed, status, error, "
        "tool_version, model, protocol, network, policy, prompt_len, decode_len, batch "
        "FROM runs ORDER BY config_hash",
        "SELECT r.config_hash, m.name, printf('%.17g', m.value), m.unit FROM metrics m JOIN runs "
        "r ON r.id = m.run_id ORDER BY 1, 2",
        "SELECT r.config_hash, p.phase, p.latency_ns, p.events FROM phases p JOIN runs r ON "
        "r.id = p.run_id ORDER BY 1, 2",
        "SELECT r.config_hash, b.phase, b.category, b.rounds, b.bytes_p0, b.bytes_p1, "
        "b.bytes_p2, b.offline_p0, b.offline_p1, b.offline_p2, b.compute_ns, b.comm_ns FROM "
        "breakdown b JOIN runs r ON r.id = b.run_id ORDER BY 1, 2, 3",
        "SELECT r.config_hash, b.phase, b.layer, b.rounds, b.bytes_p0, b.bytes_p1, b.bytes_p2, "
        "b.offline_p0, b.offline_p1, b.offline_p2, b.compute_ns, b.comm_ns FROM "
        "layer_breakdown b JOIN runs r ON r.id = b.run_id ORDER BY 1, 2, 3"};
    sqlite3 *h = sqlfix_open_ro(path);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    for (size_t q = 0; q < sizeof sql / sizeof sql[0]; q++) {
        sqlite3_stmt *s;
        ck_assert_int_eq(sqlite3_prepare_v2(h, sql[q], -1, &s, NULL), SQLITE_OK);
        while (sqlite3_step(s) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(s); c++) {
                const unsigned char *t = sqlite3_column_text(s, c);
                fprintf(f, "%s|", t ? (const char *)t : "NULL");
            }
            fputc('\n', f);
        }
        sqlite3_finalize(s);
        fputs("--\n", f);
    }
    fclose(f);
    sqlite3_close(h);
    return buf;
}

/* Runs lacking any of their rows: phases, breakdown (total + every category per phase),
 * metrics, or as many layer rows as the fullest run. */
static long long incomplete_runs(const char *path)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM runs r WHERE r.status <> 'ok' "
             "OR (SELECT count(*) FROM phases p WHERE p.run_id = r.id) <> %d "
             "OR (SELECT count(*) FROM breakdown b WHERE b.run_id = r.id) <> %d "
             "OR (SELECT count(*) FROM metrics m WHERE m.run_id = r.id) = 0 "
             "OR (SELECT count(*) FROM layer_breakdown l WHERE l.run_id = r.id) <> "
             "  (SELECT max(c) FROM (SELECT count(*) c FROM layer_breakdown GROUP BY run_id))",
             PHASE_N, PHASE_N * (OPC_N + 1));
    return sqlfix_file_int(path, sql);
}

static long long orphan_rows(const char *path)
{
    return sqlfix_file_int(
        path, "SELECT (SELECT count(*) FROM metrics WHERE run_id NOT IN (SELECT id FROM "
              "runs)) + (SELECT count(*) FROM breakdown WHERE run_id NOT IN (SELECT id "
              "FROM runs)) + (SELECT count(*) FROM phases WHERE run_id NOT IN (SELECT id "
              "FROM runs)) + (SELECT count(*) FROM layer_breakdown WHERE run_id NOT IN "
              "(SELECT id FROM runs))");
}

/* ---- tests ----------------------------------------------------------------------------- */

START_TEST(test_help_and_usage)
{
    static const char *const cmds[] = {"run", "report", "plot", "merge"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(MPCSIM(cmds[i], "--help"), 0);
        char *out = th_slurp(tpath("out.txt"), NULL), want[32];
        snprintf(want, sizeof want, "usage: mpcsim %s", cmds[i]);
        ck_assert_msg(strstr(out, want), "%s --help printed: %s", cmds[i], out);
        free(out);
        ck_assert_int_eq(MPCSIM(cmds[i], "--no-such-option"), 2);
        ck_assert_int_eq(MPCSIM(cmds[i]), 2); /* missing operand */
    }
    clifix_write_sweep(tpath("s.yaml"), "usage", 1, 0);
    static const th_argv usage[] = {
        {"run", "s.yaml", "-j", "0"},        {"run", "s.yaml", "-j", "two"},
        {"run", "s.yaml", "--shard", "3/2"}, {"run", "s.yaml", "--shard", "0/2"},
        {"run", "s.yaml", "--shard", "1"},   {"report", "missing.db"},
    };
    th_run_each(tmpdir, tagged("out"), tagged("err"), 2, usage, TH_N(usage));
    ck_assert(!th_exists(tpath("missing.db")));
    ck_assert(!th_exists(tpath("results")));
}
END_TEST

/* Every command parses with an option table (sim/cli/opt.h): an unknown option names the
 * nearest one, a missing value and a bad number are usage errors (exit 2), each with its
 * message. None of these command lines gets past its options, so none writes anything. */
static const struct {
    const char *args, *msg;
} bad_options[] = {
    {"run --outptu x.db s.yaml",
     "unknown option '--outptu' (did you mean '--output'? see mpcsim run --help)"},
    {"run s.yaml -j", "option '-j' needs a value"},
    {"run s.yaml -j two", "--jobs wants a number of workers from 1 to 256, not 'two'"},
    {"run s.yaml --progress-every 0", "--progress-every wants seconds from 0.1 to 86400, not '0'"},
    {"run s.yaml --shard 0/2", "--shard wants K/N with 1 <= K <= N (e.g. 2/8) or auto, not '0/2'"},
    {"report --colums 30 r.db", "unknown option '--colums' (did you mean '--columns'?"},
    {"report r.db --columns 5", "--columns wants a width from 20 to 10000, not '5'"},
    {"report r.db --where", "option '--where' needs a value"},
    {"plot --fromat png r.db", "unknown option '--fromat' (did you mean '--format'?"},
    {"plot r.db --format gif", "--format is png, svg or pdf, not 'gif'"},
    {"plot r.db --latency", "option '--latency' needs a value"},
    {"merge --quite a.db b.db", "unknown option '--quite' (did you mean '--quiet'?"},
    {"list --csots protocols", "unknown option '--csots' (did you mean '--costs'?"},
    {"list protocols --costs -n x", "--elems wants an element count in [1, 16777216], not 'x'"},
    {"list protocols --costs --ring-bits", "option '--ring-bits' needs a value"},
    {"calibrate --secnods 1", "unknown option '--secnods' (did you mean '--seconds'?"},
    {"calibrate --threads 0", "--threads wants an integer in 1..256, not '0'"},
    {"calibrate --seconds 0", "--seconds wants a number in (0, 3600], not '0'"},
    {"breakeven --lantecy 1ms s.yaml", "unknown option '--lantecy' (did you mean '--latency'?"},
    {"breakeven s.yaml --ops x", "--ops wants a count 1..4096, not 'x'"},
    {"breakeven s.yaml --bandwidth", "option '--bandwidth' needs a value"},
    {"breakeven s.yaml --latency 1ms,zz", "--latency: bad value 'zz'"},
    {"serve --reqeusts 3", "unknown option '--reqeusts' (did you mean '--requests'?"},
    {"serve --requests -5", "--requests wants an integer in [1, 10000000], not '-5'"},
    {"serve -n 3 --rate 0", "--rate wants a rate in [1e-12, 1e9] requests per second, not '0'"},
    {"serve -n", "option '-n' needs a value"},
    {"serve -n 3 --position sideways", "--position is rerotate or recompute, not 'sideways'"},
    {"cost --protcol semi2k", "unknown option '--protcol' (did you mean '--protocol'?"},
    {"cost -m gpt2 -p semi2k -n lan --phase prefill --tokens x",
     "--tokens wants an integer in [1, 16777216], not 'x'"},
    {"trace synth --tokenz 3",
     "unknown option '--tokenz' (did you mean '--tokens'? see mpcsim trace synth --help)"},
    {"trace synth -m gpt2 --tokens 0 --stats",
     "--tokens wants an integer in [1, 16777216], not '0'"},
    {"trace info --tol x d", "--tol wants a number in (0, 1], not 'x'"},
    {"trace fit --sinks", "option '--sinks' needs a value"},
    {"trace record -n 0", "--max-tokens wants an integer in [1, 16777216], not '0'"},
    {"validate --protocl aby3", "unknown option '--protocl' (did you mean '--protocol'?"},
    {"party --peesr a:1", "unknown option '--peesr' (did you mean '--peers'?"},
};

START_TEST(test_bad_options)
{
    char out[4096];
    int st = th_cli_capture(bad_options[_i].args, out, sizeof out);
    ck_assert_msg(st == 2, "mpcsim %s: exit %d, not 2: %s", bad_options[_i].args, st, out);
    ck_assert_msg(strstr(out, bad_options[_i].msg) && strstr(out, ": error: "),
                  "mpcsim %s printed: %s", bad_options[_i].args, out);
}
END_TEST

/* The number of characters (UTF-8 code points) of the longest line of s. */
static int widest_line(const char *s, const char **where)
{
    int best = 0, n = 0;
    const char *start = s;
    for (const char *p = s;; p++) {
        if (*p == '\n' || !*p) {
            if (n > best)
                best = n, *where = start;
            if (!*p)
                return best;
            n = 0;
            start = p + 1;
        } else if (((unsigned char)*p & 0xc0) != 0x80) {
            n++;
        }
    }
}

/* mpcsim's and every command's --help (its options printed from the table it parses with)
 * exits 0, names the command and reads in 80 columns. */
START_TEST(test_help_texts)
{
    static const char *const cmds[] = {
        "",           "run",      "report", "plot",  "merge",        "list",        "calibrate",
        "breakeven",  "serve",    "cost",   "trace", "trace record", "trace synth", "trace fit",
        "trace info", "validate", "party"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64], out[16384], want[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        ck_assert_int_eq(th_cli_capture(args, out, sizeof out), 0);
        snprintf(want, sizeof want, "usage: mpcsim %s", cmds[i]);
        ck_assert_msg(strstr(out, want), "mpcsim %s printed: %s", args, out);
        ck_assert_msg(strstr(out, "  -h, --help"), "mpcsim %s lists no --help", args);
        const char *line = out;
        int w = widest_line(out, &line);
        ck_assert_msg(w <= 80, "mpcsim %s: a line of %d columns: %.100s", args, w, line);
    }
}
END_TEST

/* The option names of mpcsim's and every command's --help, as " --name " words, for look-ups. */
static char *all_options(void)
{
    static const char *const cmds[] = {"",          "run",        "report",       "plot",
                                       "merge",     "list",       "calibrate",    "breakeven",
                                       "serve",     "cost",       "trace record", "trace synth",
                                       "trace fit", "trace info", "validate",     "party"};
    size_t cap = 1 << 16, len = 1;
    char *names = calloc(cap, 1), out[16384];
    ck_assert_ptr_nonnull(names);
    names[0] = ' ';
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        ck_assert_int_eq(th_cli_capture(args, out, sizeof out), 0);
        for (const char *p = out; (p = strstr(p, "--")); p += 2) {
            size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");
            if (n && len + n + 4 < cap)
                len += (size_t)snprintf(names + len, cap - len, "--%.*s ", (int)n, p + 2);
        }
    }
    return names;
}

/* The manual page and the bash completion name no option that no command has: each
 * "\-\-name" of mpcsim.1 and each --name of the completion's value cases is in some
 * command's --help. */
/* The folders' include graph points one way: no arrow up the pipeline, no circle
 * (scripts/rooms.py over the source tree; README "Layout"). */
START_TEST(test_rooms_point_one_way)
{
    char cmd[4200], out[8192];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/scripts/rooms.py' '%s'", th_data(), th_data());
    int rc = th_sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "scripts/rooms.py exited %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "arrows up 0, circles 0"));
}
END_TEST

START_TEST(test_man_and_completion_options)
{
    char *names = all_options();
    static const char *const files[] = {"sim/cli/mpcsim.1", "scripts/completion/mpcsim.bash"};
    for (size_t f = 0; f < 2; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", th_data(), files[f]);
        char *text = th_slurp(path, NULL);
        const char *dash = f == 0 ? "\\-\\-" : "--";
        int seen = 0;
        for (const char *p = text; (p = strstr(p, dash)); p += strlen(dash)) {
            const char *q = p + strlen(dash);
            char name[64] = " --";
            size_t n = 3;
            while (n < sizeof name - 2 &&
                   (islower((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '-' ||
                    (*q == '\\' && q[1] == '-'))) {
                if (*q == '\\')
                    q++;
                name[n++] = *q++;
            }
            if (n == 3 || name[n - 1] == '-')
                continue; /* "--" alone, or "--[a-z]" in a pattern */
            name[n++] = ' ';
            name[n] = '\0';
            ck_assert_msg(strstr(names, name), "%s names%s, which no command's --help has",
                          files[f], name);
            seen++;
        }
        ck_assert_int_gt(seen, 10);
        free(text);
    }
    free(names);
}
END_TEST

/* A scenario with an input error: exit 2, a file:line:col message, and no database at all. */
START_TEST(test_input_error_writes_nothing)
{
    th_write(tpath("bad.yaml"), "format: 1\nname: bad\nmodel: gpt2\nbandwith: 10\nnetwork: lan\n"
                                "policies: [full]\nworkload: {prompt_len: 64, decode_len: 2}\n");
    ck_assert_int_eq(MPCSIM("run", "bad.yaml", "-o", "bad.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "bad.yaml:4:") && strstr(err, "error"), "stderr: %s", err);
    free(err);
    ck_assert(!th_exists(tpath("bad.db")));
    ck_assert_int_eq(MPCSIM("run", "bad.yaml"), 2);
    ck_assert(!th_exists(tpath("results")));
    ck_assert_int_eq(MPCSIM("run", "no-such-file.yaml"), 2);
    ck_assert(!th_exists(tpath("results")));
}
END_TEST

/* A policy's rules between parameters (policy_check) are checked when the scenario is loaded:
 * MPCache's s1 = 2·s2 broken in a sweep's second policy exits 2 at its file:line:col, for a
 * run, a --dry-run and `validate --policy`, and leaves a results database as it was. */
START_TEST(test_policy_rules_at_load)
{
    th_write(tpath("ok.yaml"), "format: 1\nname: ok\nmodel: gpt2\nprotocol: semi2k\n"
                               "network: lan\npolicies: [full]\n"
                               "workload: {prompt_len: 16, decode_len: 1}\n");
    ck_assert_int_eq(MPCSIM("run", "ok.yaml", "-o", "r.db", "-q"), 0);
    char *before = dump(tpath("r.db"));
    th_write(tpath("s1.yaml"), "format: 1\nname: s1\nmodel: gpt2\nprotocol: semi2k\n"
                               "network: lan\ntrace: {source: synth}\n"
                               "workload: {prompt_len: 16, decode_len: 1}\npolicies:\n"
                               "  - full\n  - {name: mpcache, s1: 20, s2: 16}\n");
    const char *want = "s1.yaml:10:21: error: policy mpcache needs s1 = 2·s2";
    for (int dry = 0; dry < 2; dry++) {
        ck_assert_int_eq(dry ? MPCSIM("run", "s1.yaml", "--dry-run")
                             : MPCSIM("run", "s1.yaml", "-o", "r.db", "-q"),
                         2);
        char *err = th_slurp(tpath("err.txt"), NULL);
        ck_assert_msg(strstr(err, want), "stderr: %s", err);
        free(err);
    }
    char *after = dump(tpath("r.db"));
    ck_assert_msg(!strcmp(before, after), "the database changed");
    free(before);
    free(after);
    ck_assert_int_eq(MPCSIM("run", "s1.yaml", "-o", "new.db"), 2);
    ck_assert(!th_exists(tpath("new.db")));
    ck_assert_int_eq(MPCSIM("validate", "--model", "stories260K", "--accuracy", "20", "--policy",
                            "mpcache", "--policy-param", "s1=20", "--policy-param", "s2=16"),
                     2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "--policy-param s1=20: policy mpcache needs s1 = 2·s2"), "stderr: %s",
                  err);
    free(err);
    /* kv_budget beside the policy's own budget, and beside an explicit static threshold */
    ck_assert_int_eq(MPCSIM("validate", "--model", "stories260K", "--accuracy", "20", "--policy",
                            "h2o", "--policy-param", "kv_budget=0.1", "--policy-param", "heavy=3"),
                     2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "--policy-param heavy=3: policy h2o: 'heavy' and 'kv_budget' both"),
                  "stderr: %s", err);
    free(err);
    ck_assert_int_eq(MPCSIM("validate", "--model", "stories260K", "--accuracy", "20", "--policy",
                            "mpcache", "--policy-param", "static=threshold", "--policy-param",
                            "kv_budget=0.2"),
                     2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "'static: threshold' keeps a data-dependent share"), "stderr: %s",
                  err);
    free(err);
}
END_TEST

/* Out-of-range numbers get a clear error, not an overflow later: a bandwidth of 1e-300 is
 * refused at its line, and a network too slow for 64-bit simulated time fails the run with
 * a range error that `report` lists as a failed run. */
START_TEST(test_out_of_range_inputs)
{
    th_write(tpath("bw.yaml"), "format: 1\nname: bw\nmodel: llama-2-7b\nprotocol: semi2k\n"
                               "network: {name: slow, latency_ms: 1, bandwidth_bps: 1e-300}\n"
                               "policies: [full]\nworkload: {prompt_len: 512, decode_len: 1}\n");
    ck_assert_int_eq(MPCSIM("run", "bw.yaml", "-o", "bw.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "bw.yaml:5:") && strstr(err, "'bandwidth_bps' = 1e-300 is out of "
                                                           "range"),
                  "stderr: %s", err);
    free(err);
    ck_assert(!th_exists(tpath("bw.db")));
    ck_assert_int_eq(
        MPCSIM("cost", "-m", "gpt2", "-p", "semi2k", "-n", "1ms/1e-300bps", "-k", "64"), 2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "bad bandwidth '1e-300bps'"), "stderr: %s", err);
    free(err);
    /* the slowest accepted link: a 7B prefill takes longer than 2^56 ns */
    th_write(tpath("bw.yaml"), "format: 1\nname: bw\nmodel: llama-2-7b\nprotocol: semi2k\n"
                               "network: {name: slow, latency_ms: 1, bandwidth_bps: 1000}\n"
                               "policies: [full]\nworkload: {prompt_len: 512, decode_len: 1}\n");
    ck_assert_int_eq(MPCSIM("run", "bw.yaml", "-o", "bw.db"), 1);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "runs past 2^56 ns"), "stderr: %s", err);
    free(err);
    ck_assert_int_eq(MPCSIM("report", "bw.db"), 0);
    ck_assert_int_eq(
        sqlfix_file_int(tpath("bw.db"), "SELECT count(*) FROM runs WHERE status = 'failed'"), 1);
}
END_TEST

/* --dry-run lists every run and writes nothing; shards partition the runs. */
START_TEST(test_dry_run_and_shards)
{
    clifix_write_sweep(tpath("s.yaml"), "dry", 3, 0); /* 12 runs */
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run"), 0);
    char *all = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(all, "12 runs"));
    ck_assert(!th_exists(tpath("results")));
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run", "-v"), 0);
    char *verbose = th_slurp(tpath("out.txt"), NULL);
    ck_assert_int_eq(th_count(verbose, "\n---\n"), 12);
    ck_assert_ptr_nonnull(strstr(verbose, "prompt_len"));
    free(verbose);
    int total = 0;
    for (int k = 1; k <= 3; k++) {
        char shard[16];
        snprintf(shard, sizeof shard, "%d/3", k);
        ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run", "--shard", shard), 0);
        char *out = th_slurp(tpath("out.txt"), NULL);
        ck_assert_ptr_nonnull(strstr(out, "4 runs"));
        /* every line of the shard (hash + summary) is a line of the full listing */
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
            if (strlen(line) > 16 && line[16] == ' ') {
                ck_assert_msg(strstr(all, line), "shard line not in full listing: %s", line);
                total++;
            }
        free(out);
    }
    ck_assert_int_eq(total, 12);
    free(all);
    /* --shard auto takes K/N from an MPI launcher's environment; -o {shard} becomes K */
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run", "--shard", "2/3"), 0);
    char *two = th_slurp(tpath("out.txt"), NULL);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run", "--shard", "auto"), 0);
    char *autos = th_slurp(tpath("out.txt"), NULL);
    ck_assert_str_eq(autos, two);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-q", "--shard", "auto", "-o", "part-{shard}.db"), 0);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    ck_assert_int_eq(sqlfix_file_int(tpath("part-2.db"), "SELECT count(*) FROM runs"), 4);
    ck_assert_int_eq(
        sqlfix_file_int(tpath("part-2.db"), "SELECT count(*) FROM runs WHERE grid_index % 3 <> 1"),
        0);
    free(two);
    free(autos);
    if (!getenv("PMI_RANK") && !getenv("SLURM_ARRAY_TASK_ID") && !getenv("SLURM_PROCID"))
        ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run", "--shard", "auto"), 2);
    /* grid points that resolve to the same config run once */
    th_write(tpath("dup.yaml"), "format: 1\nname: dup\nmodel: gpt2\nnetwork: lan\n"
                                "protocol: [semi2k, semi2k]\npolicies: [full]\n"
                                "workload: {prompt_len: [64, 96], decode_len: 2}\n");
    ck_assert_int_eq(MPCSIM("run", "dup.yaml", "--dry-run"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_msg(strstr(out, "\n2 runs\n"), "dry run: %s", out);
    free(out);
    ck_assert(!th_exists(tpath("results")));
}
END_TEST

/* The database path: -o, else the scenario's output:, else results/<name>.db; an existing
 * database holding this scenario needs --resume. */
START_TEST(test_db_path_and_resume_guard)
{
    clifix_write_sweep(tpath("s.yaml"), "guard", 1, 0);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-q"), 0);
    ck_assert(th_exists(tpath("results/guard.db")));
    ck_assert_int_eq(sqlfix_file_int(tpath("results/guard.db"), "SELECT count(*) FROM runs"), 4);
    ck_assert_int_eq(MPCSIM("run", "s.yaml"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "--resume") && strstr(err, "-o"), "stderr: %s", err);
    free(err);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--resume"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "nothing to run"));
    free(out);
    ck_assert_int_eq(sqlfix_file_int(tpath("results/guard.db"), "SELECT count(*) FROM runs"), 4);
    char *text = th_slurp(tpath("s.yaml"), NULL);
    char with_out[4096];
    snprintf(with_out, sizeof with_out, "%soutput: named.db\n", text);
    free(text);
    th_write(tpath("s2.yaml"), with_out);
    ck_assert_int_eq(MPCSIM("run", "s2.yaml", "-q"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("named.db"), "SELECT count(*) FROM runs"), 4);
    ck_assert_int_eq(MPCSIM("run", "s2.yaml", "-q", "-o", "deep/er/flag.db"), 0);
    ck_assert(th_exists(tpath("deep/er/flag.db")));
}
END_TEST

/* Polls a database until it holds at least n ok runs (or timeout); returns the count. */
static long long wait_runs(const char *path, long long n, double timeout_s)
{
    struct timespec ts = {0, 10 * 1000000};
    long long have = 0;
    for (double t = 0; t < timeout_s; t += 0.01) {
        if (th_exists(path)) {
            sqlite3 *h = NULL;
            sqlite3_stmt *s;
            if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
                sqlite3_prepare_v2(h, "SELECT count(*) FROM runs WHERE status = 'ok'", -1, &s,
                                   NULL) == SQLITE_OK) {
                if (sqlite3_step(s) == SQLITE_ROW)
                    have = sqlite3_column_int64(s, 0);
                sqlite3_finalize(s);
            }
            sqlite3_close(h);
            if (have >= n)
                return have;
        }
        nanosleep(&ts, NULL);
    }
    return have;
}

/* A sweep SIGKILLed mid-way keeps only complete runs; --resume finishes it without duplicates. */
START_TEST(test_kill_and_resume)
{
    clifix_write_sweep(tpath("slow.yaml"), "slow", 3, 1); /* 12 runs */
    const char *db = tpath("slow.db");
    pid_t pid = SPAWN("run", "slow.yaml", "-o", "slow.db", "-j", "2", "-q");
    long long seen = wait_runs(db, 2, 60);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sweep ended before the kill");
    ck_assert_int_ge(seen, 2);
    long long kept = sqlfix_file_int(db, "SELECT count(*) FROM runs");
    ck_assert_int_ge(kept, 2);
    ck_assert_int_lt(kept, 12);
    ck_assert_int_eq(incomplete_runs(db), 0);
    ck_assert_int_eq(orphan_rows(db), 0);
    ck_assert_int_eq(MPCSIM("run", "slow.yaml", "-o", "slow.db", "-j", "2", "--resume"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    char want[64];
    snprintf(want, sizeof want, "%lld already there", kept);
    ck_assert_msg(strstr(out, want), "resume summary: %s", out);
    free(out);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs"), 12);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(DISTINCT config_hash) FROM runs"), 12);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(DISTINCT grid_index) FROM runs"), 12);
    ck_assert_int_eq(incomplete_runs(db), 0);
    ck_assert_int_eq(orphan_rows(db), 0);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE "
                                         "integrity_check <> 'ok'"),
                     0);
}
END_TEST

/* A sweep of trace runs: the runs of one trace and prompt length run as a group over shared
 * rows (sim/scenario/group.h). The database equals that of every run executed alone (one run
 * per shard), row for row; a sweep resumed after half of its runs (every other one: each
 * group loses some) recomputes the missing runs of each group only and ends with the same
 * rows. */
START_TEST(test_groups_same_as_alone)
{
    th_write(tpath("g.yaml"),
             "format: 1\nname: grp\nseed: 3\nmodel: gpt2\nprotocol: aby3\n"
             "network: lan\ntrace: {source: synth}\n"
             "workload: {prompt_len: [24, 40, 64], decode_len: 6, decode_stride: 2}\n"
             "policies:\n  - full\n  - {name: h2o, heavy: 8, recent: 8, metric_stride: 2}\n"
             "  - {name: quest, budget: 8, page: 4, metric_stride: 1}\n"
             "  - {name: snapkv, capacity: 12}\n");
    ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "g.db", "-j", "2", "-q"), 0);
    ck_assert_int_eq(
        sqlfix_file_int(tpath("g.db"), "SELECT count(*) FROM runs WHERE status = 'ok'"), 12);
    char arg[16];
    for (int k = 1; k <= 12; k++) {
        snprintf(arg, sizeof arg, "%d/12", k);
        ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "a.db", "--shard", arg, "--resume", "-q"),
                         0);
    }
    char *g = dump(tpath("g.db")), *a = dump(tpath("a.db"));
    ck_assert_msg(!strcmp(g, a), "grouped and alone differ");
    free(a);
    ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "k.db", "--shard", "1/2", "-q"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("k.db"), "SELECT count(*) FROM runs"), 6);
    ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "k.db", "-j", "2", "--resume"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_msg(strstr(out, "6 already there"), "resume summary: %s", out);
    free(out);
    char *k = dump(tpath("k.db"));
    ck_assert_msg(!strcmp(g, k), "resumed differs from the whole sweep");
    free(k);
    free(g);
}
END_TEST

/* The first child process of pid (from /proc), or -1. */
static pid_t first_child(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    int child = -1;
    if (f) {
        if (fscanf(f, "%d", &child) != 1)
            child = -1;
        fclose(f);
    }
    return child;
}

/* Kills the first worker of a -j 2 sweep once a run is recorded; returns the sweep's exit
 * status. */
static int sweep_with_worker_killed(const char *yaml, const char *dbname)
{
    pid_t pid = SPAWN("run", yaml, "-o", dbname, "-j", "2", "-q");
    ck_assert_int_ge(wait_runs(tpath(dbname), 1, 60), 1);
    pid_t w = first_child(pid);
    ck_assert_int_gt(w, 0);
    ck_assert_int_eq(kill(w, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* A worker killed mid-run: its run is recorded as failed, the other worker finishes the sweep,
 * the exit status is 1, and --resume runs the failed one again. A kill that lands while the
 * worker waits between two runs fails nothing (the sweep then ends 0 with every run ok); the
 * test tries again with a fresh database until the kill lands mid-run (a run takes ~100 ms,
 * the gap between runs well under 1 ms). */
START_TEST(test_worker_death)
{
    clifix_write_sweep(tpath("w.yaml"), "wdeath", 3, 1); /* 12 runs */
    char dbname[32] = "";
    int status = 0;
    for (int attempt = 0; attempt < 4 && status != 1; attempt++) {
        snprintf(dbname, sizeof dbname, "w%d.db", attempt);
        status = sweep_with_worker_killed("w.yaml", dbname);
        if (status == 0)
            ck_assert_int_eq(
                sqlfix_file_int(tpath(dbname), "SELECT count(*) FROM runs WHERE status = 'ok'"),
                12);
    }
    ck_assert_int_eq(status, 1);
    const char *db = tpath(dbname);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "died during the run"), "stderr: %s", err);
    free(err);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs"), 12);
    ck_assert_int_eq(
        sqlfix_file_int(db, "SELECT count(*) FROM runs WHERE status = 'failed' AND error LIKE "
                            "'%died during the run%'"),
        1);
    ck_assert_int_eq(
        sqlfix_file_int(db, "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id "
                            "WHERE r.status = 'failed'"),
        0);
    ck_assert_int_eq(MPCSIM("run", "w.yaml", "-o", dbname, "--resume", "-q"), 0);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs"), 12);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 12);
    ck_assert_int_eq(incomplete_runs(db), 0);
}
END_TEST

/* Same scenario and seed: byte-identical rows, whether run with -j 1 or -j 2, or in shards. */
START_TEST(test_determinism_and_merge)
{
    clifix_write_sweep(tpath("d.yaml"), "det", 3, 0); /* 12 runs */
    ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", "a.db", "-q", "-j", "2"), 0);
    ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", "b.db", "-q"), 0);
    char *a = dump(tpath("a.db")), *b = dump(tpath("b.db"));
    ck_assert_int_gt(strlen(a), 1000);
    ck_assert_int_eq(th_count(a, "|ok|"), 12);
    ck_assert_msg(!strcmp(a, b), "two runs of one scenario differ");
    free(b);
    for (int k = 1; k <= 3; k++) {
        char shard[16], out[16];
        snprintf(shard, sizeof shard, "%d/3", k);
        snprintf(out, sizeof out, "s%d.db", k);
        ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", out, "-q", "--shard", shard), 0);
    }
    ck_assert_int_eq(MPCSIM("merge", "m.db", "s1.db", "s2.db", "s3.db"), 0);
    char *m = dump(tpath("m.db"));
    ck_assert_msg(!strcmp(a, m), "merged shards differ from the whole sweep");
    free(m);
    /* merging again, and the whole sweep on top, adds nothing */
    ck_assert_int_eq(MPCSIM("merge", "m.db", "s2.db", "a.db"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_msg(strstr(out, "0 runs added, 16 already there"), "merge said: %s", out);
    free(out);
    m = dump(tpath("m.db"));
    ck_assert(!strcmp(a, m));
    free(m);
    free(a);
    /* a source of another schema version: refused, output untouched */
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(tpath("s1.db"), &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    ck_assert_int_eq(MPCSIM("merge", "fresh.db", "s2.db", "s1.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "s1.db") && strstr(err, "schema version 99"), "stderr: %s", err);
    free(err);
    ck_assert(!th_exists(tpath("fresh.db")));
    ck_assert_int_eq(MPCSIM("merge", "m.db", "m.db"), 2);
}
END_TEST

/* Runs `mpcsim args...` in a child whose view of folder dir is a read-only mount (a mount
 * namespace of its own; needs root), or, without root, in a folder whose write bit is off.
 * The exit status, or -1 when neither is possible here. */
static int run_on_readonly(const char *dir, const char *const *args)
{
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(dir, 0555), 0);
        int st = th_run(dir, tagged("out"), tagged("err"), args);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        return st;
    }
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        char ok = unshare(CLONE_NEWNS) == 0 &&
                  mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                  mount(dir, dir, NULL, MS_BIND, NULL) == 0 &&
                  mount(NULL, dir, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == 0 &&
                  access(dir, W_OK) != 0;
        if (write(pfd[1], &ok, 1) != 1 || !ok)
            _exit(0);
        _exit(th_run(dir, tagged("out"), tagged("err"), args));
    }
    close(pfd[1]);
    char ok = 0;
    if (read(pfd[0], &ok, 1) != 1)
        ok = 0;
    close(pfd[0]);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    return ok && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void set_pragma(const char *path, const char *sql)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(h), SQLITE_OK);
}

/* Files of a folder other than the databases a test made (temporary merge outputs, WAL). */
static int stray_files(const char *dir)
{
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -e merge -e -wal -e -shm -e -journal", dir);
    th_sh(cmd, out, sizeof out);
    if (*out)
        fprintf(stderr, "stray files in %s:\n%s", dir, out);
    return th_count(out, "\n");
}

/* merge fails loudly and leaves its output as it was; readers never write; every schema
 * version outside the known range is an error, not a crash; --json has no non-finite number. */
START_TEST(test_data_safety)
{
    clifix_write_sweep(tpath("d.yaml"), "safe", 1, 0); /* 4 runs */
    ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", "s1.db", "-q", "--shard", "1/2"), 0);
    ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", "s2.db", "-q", "--shard", "2/2"), 0);
    ck_assert_int_eq(MPCSIM("merge", "m.db", "s1.db"), 0);
    char *before = th_slurp(tpath("m.db"), NULL);
    size_t before_len = 0;
    free(th_slurp(tpath("m.db"), &before_len));
    /* a malformed shard, a foreign database, a negative schema version: non-zero, the output
     * byte-identical, no output created, no temporary file left */
    th_write(tpath("junk.db"), "this is not a database, but long enough to look like a header\n");
    set_pragma(tpath("foreign.db"), "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    th_copy(tpath("s2.db"), tpath("neg.db"));
    set_pragma(tpath("neg.db"), "PRAGMA user_version = -1");
    /* our version number, but not our tables: passes the check, fails inside the merge */
    set_pragma(tpath("fake4.db"), "CREATE TABLE t(x); PRAGMA user_version = 5;");
    static const char *const bad_inputs[] = {"junk.db", "foreign.db", "neg.db", "fake4.db"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_ne(MPCSIM("merge", "m.db", "s2.db", bad_inputs[i]), 0);
        ck_assert_int_ne(MPCSIM("merge", "new.db", "s2.db", bad_inputs[i]), 0);
        ck_assert(!th_exists(tpath("new.db")));
        size_t len = 0;
        char *now = th_slurp(tpath("m.db"), &len);
        ck_assert_msg(len == before_len && !memcmp(now, before, len), "m.db changed (%s)",
                      bad_inputs[i]);
        free(now);
    }
    /* an output that is not ours */
    ck_assert_int_ne(MPCSIM("merge", "foreign.db", "s2.db"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("foreign.db"), "SELECT count(*) FROM t"), 1);
    ck_assert_int_eq(stray_files(tmpdir), 0);
    free(before);
    /* the good merge still works, and keeps the output's mode */
    ck_assert_int_eq(chmod(tpath("m.db"), 0640), 0);
    ck_assert_int_eq(MPCSIM("merge", "m.db", "s2.db"), 0);
    ck_assert_int_eq(stray_files(tmpdir), 0);
    th_assert_mode(tpath("m.db"), 0640);
    ck_assert_int_eq(sqlfix_file_int(tpath("m.db"), "SELECT count(*) FROM runs"), 4);

    /* readers: a schema version below 0 or above ours is a clear error, never a crash */
    static const char *const readers[][4] = {
        {"report", "DB", NULL}, {"plot", "DB", "-o", "p.png"}, {"report", "--json", "DB", NULL}};
    char above[16];
    snprintf(above, sizeof above, "%d", RDB_SCHEMA_VERSION + 1);
    const char *const versions[] = {"-1", "-2147483648", above, "99"};
    for (size_t v = 0; v < 4; v++) {
        char sql[64];
        th_copy(tpath("s2.db"), tpath("v.db"));
        snprintf(sql, sizeof sql, "PRAGMA user_version = %s", versions[v]);
        set_pragma(tpath("v.db"), sql);
        for (size_t r = 0; r < 3; r++) {
            const char *args[8] = {NULL};
            for (int a = 0; a < 4 && readers[r][a]; a++)
                args[a] = strcmp(readers[r][a], "DB") ? readers[r][a] : "v.db";
            ck_assert_int_eq(MPCSIM(args[0], args[1], args[2], args[3]), 2);
            char *err = th_slurp(tagged("err"), NULL);
            ck_assert_msg(strstr(err, "v.db: results schema version") ||
                              strstr(err, "v.db: results schema"),
                          "%s %s: %s", args[0], versions[v], err);
            free(err);
        }
        ck_assert_int_eq(MPCSIM("run", "d.yaml", "-o", "v.db", "--resume", "-q"), 2);
    }
    /* readers write nothing into an empty or foreign file */
    th_write(tpath("empty.db"), "");
    ck_assert_int_eq(MPCSIM("report", "empty.db"), 2);
    ck_assert_int_eq(MPCSIM("plot", "empty.db", "-o", "e.png"), 2);
    size_t len = 1;
    free(th_slurp(tpath("empty.db"), &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(MPCSIM("report", "foreign.db"), 2);
    ck_assert_int_eq(sqlfix_file_int(tpath("foreign.db"), "SELECT count(*) FROM sqlite_master"), 1);
    ck_assert_int_eq(sqlfix_file_int(tpath("foreign.db"), "PRAGMA user_version"), 0);
    /* an older schema is read as it is (migrated in memory), the file unchanged */
    th_copy(th_data_path("tests/data/results-v2.db"), tpath("v2.db"));
    ck_assert_int_eq(MPCSIM("report", "v2.db"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("v2.db"), "PRAGMA user_version"), 2);

    /* a read-only mount (or folder) */
    char ro[300];
    snprintf(ro, sizeof ro, "%s/ro", tmpdir);
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    char dst[320];
    snprintf(dst, sizeof dst, "%s/m.db", ro);
    th_copy(tpath("m.db"), dst);
    const char *rep[] = {"report", "m.db", NULL};
    int st = run_on_readonly(ro, rep);
    if (st < 0)
        fprintf(stderr, "test_data_safety: SKIPPED: no read-only mount possible here\n");
    else {
        char *out = th_slurp(tagged("out"), NULL), *err = th_slurp(tagged("err"), NULL);
        ck_assert_msg(st == 0 && strstr(out, "4 runs"), "report on a read-only mount: %d %s %s", st,
                      out, err);
        free(out);
        free(err);
    }
    ck_assert_int_eq(stray_files(ro), 0);

    /* --json: an infinite metric is null, with a note */
    set_pragma(tpath("m.db"), "UPDATE metrics SET value = 9e999 WHERE name = 'latency_total_s'");
    ck_assert_int_eq(MPCSIM("report", "--json", "m.db"), 0);
    char *out = th_slurp(tagged("out"), NULL);
    ck_assert_int_eq(th_count(out, "\"latency_total_s\": null"), 4);
    ck_assert_int_eq(th_count(out, ": latency_total_s is inf, written as null"), 4);
    free(out);
}
END_TEST

/* A temporary merge output (OUT.mergeXXXXXX or its side files) in dir. */
static int merge_temp_in(const char *dir)
{
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -e '\\.merge'", dir);
    th_sh(cmd, out, sizeof out);
    return *out != 0;
}

/* merge ended by SIGINT or SIGTERM while it works (held at copying OUT, which this test keeps
 * locked): it dies of the signal, removes its temporary file, and OUT keeps its bytes. */
START_TEST(test_merge_signalled)
{
    clifix_write_sweep(tpath("g.yaml"), "sig", 1, 0); /* 4 runs */
    ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "g1.db", "-q", "--shard", "1/2"), 0);
    ck_assert_int_eq(MPCSIM("run", "g.yaml", "-o", "g2.db", "-q", "--shard", "2/2"), 0);
    ck_assert_int_eq(MPCSIM("merge", "gm.db", "g1.db"), 0);
    set_pragma(tpath("gm.db"), "PRAGMA journal_mode = DELETE");
    size_t before_len = 0;
    char *before = th_slurp(tpath("gm.db"), &before_len);
    static const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        sqlite3 *h;
        ck_assert_int_eq(sqlite3_open(tpath("gm.db"), &h), SQLITE_OK);
        ck_assert_int_eq(sqlite3_exec(h, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
        pid_t pid = SPAWN("merge", "gm.db", "g2.db", "g1.db", "g2.db");
        for (int k = 0; k < 2000 && !merge_temp_in(tmpdir); k++)
            usleep(5000);
        ck_assert_msg(merge_temp_in(tmpdir), "merge made no temporary file");
        usleep(100000); /* into the copy of gm.db, which waits for the lock */
        ck_assert_int_eq(kill(pid, sigs[i]), 0);
        ck_assert_int_eq(th_wait(pid), 128 + sigs[i]);
        ck_assert_int_eq(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        ck_assert_int_eq(sqlite3_close(h), SQLITE_OK);
        ck_assert_msg(!merge_temp_in(tmpdir), "signal %d left the temporary file", sigs[i]);
        size_t len = 0;
        char *now = th_slurp(tpath("gm.db"), &len);
        ck_assert_msg(len == before_len && !memcmp(now, before, len), "gm.db changed");
        free(now);
    }
    free(before);
    ck_assert_int_eq(MPCSIM("merge", "gm.db", "g2.db"), 0); /* and a merge left alone ends */
    ck_assert_int_eq(sqlfix_file_int(tpath("gm.db"), "SELECT count(*) FROM runs"), 4);
    ck_assert(!merge_temp_in(tmpdir));
}
END_TEST

/* Two shards started at once with --resume on one new database: it is created and migrated
 * once, and holds every run once. */
START_TEST(test_shards_share_db)
{
    clifix_write_sweep(tpath("c.yaml"), "conc", 3, 0); /* 12 runs */
    pid_t a = SPAWN("run", "c.yaml", "-o", "c.db", "--resume", "-q", "--shard", "1/2");
    pid_t b = SPAWN("run", "c.yaml", "-o", "c.db", "--resume", "-q", "--shard", "2/2");
    int sa, sb;
    ck_assert_int_eq(waitpid(a, &sa, 0), a);
    ck_assert_int_eq(waitpid(b, &sb, 0), b);
    ck_assert(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    ck_assert(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("c.db"), "SELECT count(*) FROM runs"), 12);
    ck_assert_int_eq(sqlfix_file_int(tpath("c.db"), "SELECT count(DISTINCT config_hash) FROM runs"),
                     12);
    ck_assert_int_eq(sqlfix_file_int(tpath("c.db"), "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    ck_assert_int_eq(incomplete_runs(tpath("c.db")), 0);
}
END_TEST

/* Two resumes of the whole sweep at once on one database: each skips what the other stored
 * meanwhile, without an error, and the database holds every run once. */
START_TEST(test_concurrent_resumes)
{
    clifix_write_sweep(tpath("r.yaml"), "race", 3, 0); /* 12 runs */
    for (int round = 0; round < 2; round++) {
        const char *db = round ? "r2.db" : "r1.db";
        spawn_tag = "a";
        pid_t a = SPAWN("run", "r.yaml", "-o", db, "--resume");
        spawn_tag = "b";
        pid_t b = SPAWN("run", "r.yaml", "-o", db, "--resume", "-j", "2");
        spawn_tag = "";
        int sa, sb;
        ck_assert_int_eq(waitpid(a, &sa, 0), a);
        ck_assert_int_eq(waitpid(b, &sb, 0), b);
        char *ea = th_slurp(tpath("erra.txt"), NULL), *eb = th_slurp(tpath("errb.txt"), NULL);
        ck_assert_msg(WIFEXITED(sa) && WEXITSTATUS(sa) == 0, "a: %d, %s", sa, ea);
        ck_assert_msg(WIFEXITED(sb) && WEXITSTATUS(sb) == 0, "b: %d, %s", sb, eb);
        ck_assert_msg(!*ea && !*eb, "stderr: %s / %s", ea, eb);
        free(ea);
        free(eb);
        ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(*) FROM runs"), 12);
        ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(DISTINCT config_hash) FROM runs"),
                         12);
        ck_assert_int_eq(incomplete_runs(tpath(db)), 0);
        ck_assert_int_eq(orphan_rows(tpath(db)), 0);
    }
}
END_TEST

/* An executable named name on $PATH, into out; 0 when there is none. */
static int on_path(const char *name, char *out, size_t n)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, n, "%s/%s", d, name);
        if (access(out, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* A sweep split by a real MPI launcher: `mpirun -n 2 mpcsim run --shard auto` writes two
 * shards, `merge` folds them, and the result equals a one-process run row for row (runs,
 * metrics, phases, breakdown). CI installs Open MPI (scripts/install-deps.sh); elsewhere the
 * test says it did not run when mpirun is missing. */
START_TEST(test_mpirun_shards)
{
    char mpirun[4200];
    if (!on_path("mpirun", mpirun, sizeof mpirun)) {
        ck_assert_msg(!getenv("CI"), "mpirun is missing in CI (scripts/install-deps.sh installs "
                                     "openmpi-bin)");
        fprintf(stderr, "test_mpirun_shards: no mpirun on PATH: not run\n");
        return;
    }
    th_write(tpath("mpi.yaml"), "format: 1\nname: mpi\nmodel: gpt2\nnetwork: [lan, wan]\n"
                                "protocol: [semi2k, aby3]\npolicies: [full, {name: streamingllm, "
                                "recent: 32}]\nworkload: {prompt_len: [64, 96], decode_len: 2}\n");
    const char *args[] = {"-n",     "2",   "--oversubscribe", "--allow-run-as-root",
                          th_bin(), "run", "mpi.yaml",        "--shard",
                          "auto",   "-o",  "part-{shard}.db", "-q",
                          NULL};
    if (geteuid() != 0) /* Open MPI refuses root unless told; the flag is only for root */
        memmove(&args[3], &args[4], 9 * sizeof *args);
    const char *tmp0 = getenv("TMPDIR"); /* Open MPI's session folder: in the test's own */
    char *saved = tmp0 ? strdup(tmp0) : NULL;
    setenv("TMPDIR", tmpdir, 1);
    pid_t pid = th_spawn(mpirun, args, tmpdir, tpath("mpi-out.txt"), NULL);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    ck_assert_int_eq(th_wait(pid), 0);
    ck_assert_int_eq(MPCSIM("merge", "all.db", "part-1.db", "part-2.db"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("part-1.db"), "SELECT count(*) FROM runs"), 8);
    ck_assert_int_eq(sqlfix_file_int(tpath("part-2.db"), "SELECT count(*) FROM runs"), 8);
    ck_assert_int_eq(MPCSIM("run", "mpi.yaml", "-o", "one.db", "-q"), 0);
    char one[4200], sql[8192];
    snprintf(one, sizeof one, "%s", tpath("one.db"));
    static const char *const tables[] = {
        "SELECT r.config_hash, r.status, r.policy_label, r.protocol_label, r.network FROM "
        "%sruns r",
        "SELECT r.config_hash, m.name, m.value FROM %smetrics m JOIN %sruns r ON r.id = m.run_id",
        "SELECT r.config_hash, p.phase, p.latency_ns FROM %sphases p JOIN %sruns r ON r.id = "
        "p.run_id",
        "SELECT r.config_hash, b.phase, b.category, b.rounds, b.bytes_p0, b.bytes_p1, b.bytes_p2 "
        "FROM %sbreakdown b JOIN %sruns r ON r.id = b.run_id"};
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(tpath("all.db"), &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    char *att = sqlite3_mprintf("ATTACH %Q AS o", one);
    ck_assert_int_eq(sqlite3_exec(h, att, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(att);
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, tables[t], "main.", "main.");
        snprintf(b, sizeof b, tables[t], "o.", "o.");
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT count(*) FROM (%s EXCEPT %s)) + (SELECT count(*) FROM (%s "
                 "EXCEPT %s)), (SELECT count(*) FROM (%s))",
                 a, b, b, a, a);
        sqlite3_stmt *st;
        ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                      sqlite3_errmsg(h));
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        ck_assert_msg(sqlite3_column_int(st, 0) == 0, "%d rows differ: %s",
                      sqlite3_column_int(st, 0), a);
        ck_assert_int_gt(sqlite3_column_int(st, 1), 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = th_case(s, "commands", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_help_and_usage);
    TH_LOOPS(tc, sizeof bad_options / sizeof bad_options[0], test_bad_options);
    TH_TESTS(tc, test_policy_rules_at_load);
    TH_TESTS(tc, test_help_texts, test_man_and_completion_options, test_rooms_point_one_way,
             test_input_error_writes_nothing, test_out_of_range_inputs, test_dry_run_and_shards,
             test_db_path_and_resume_guard, test_kill_and_resume, test_groups_same_as_alone,
             test_worker_death, test_determinism_and_merge, test_data_safety, test_merge_signalled,
             test_shards_share_db, test_concurrent_resumes, test_mpirun_shards);
    return s;
}

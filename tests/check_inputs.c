/* check_inputs.c — every input file but scenarios and models (check_scn.c) read through the
 * schema layer: machine profiles, synthetic-trace parameters, trace manifests and serving
 * scenarios. One table row per kind of mistake, each reported at its file:line:col. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/model.h"
#include "protocols/base/yschema.h"
#include "sim/engine/machine.h"
#include "sim/scenario/scn.h"
#include "sim/trace/trace.h"
#include "harness.h"

static testdir td = {.prefix = "check_inputs"};

static void suite_setup(void) { testdir_suite_setup(&td); }
static void suite_teardown(void) { testdir_suite_teardown(&td); }
static void setup(void) { testdir_setup(&td); }
static void teardown(void) { testdir_teardown(&td); }
static const char *tpath(const char *name) { return testdir_path(&td, name); }


typedef struct bad_case {
    const char *text;
    const char *where; /* ":L:C: error: " after the file's path */
    const char *gist, *gist2;
} bad_case;

/* The message starts with path + where and holds both gists. */
static void check_msg(const char *path, const bad_case *c, const char *msg, int i)
{
    char want[700];
    snprintf(want, sizeof want, "%s%s", path, c->where);
    ck_assert_msg(!strncmp(msg, want, strlen(want)), "case %d: '%s' does not start with '%s'", i,
                  msg, want);
    ck_assert_msg(strstr(msg, c->gist), "case %d: '%s' lacks '%s'", i, msg, c->gist);
    ck_assert_msg(!c->gist2 || strstr(msg, c->gist2), "case %d: '%s' lacks '%s'", i, msg,
                  c->gist2);
}

/* ---- scenario sections (root, protocol, network, trace, policy, sweep axes) -------------
 * Each read through its schema table: the message points at the key or value, names it and
 * hints; a sweep axis's values go through the same table as a fixed key's. */

#define SC_HEAD "name: t\nmodel: stories260K\n"                              /* lines 1-2 */
#define SC_PROTO "protocol: semi2k\n"                                         /* line 3 */
#define SC_NET "network: lan\n"                                               /* line 4 */
#define SC_WORK "workload: {prompt_len: 16, decode_len: 4}\n"                 /* line 5 */
#define SC_BASE SC_HEAD SC_PROTO SC_NET SC_WORK

static const bad_case scn_bad[] = {
    {SC_BASE "sed: 3\n", ":6:1: error: ", "unknown key 'sed' in 'scenario'",
     "did you mean 'seed'?"},
    {SC_BASE "seed: [1, -1]\n", ":6:11: error: ", "'seed' = -1 is out of range", NULL},
    {SC_BASE "overlap: [true, maybe]\n", ":6:17: error: ", "'overlap' must be true or false",
     NULL},
    {"format: 2\n" SC_BASE, ":1:9: error: ", "unsupported scenario format 2", NULL},
    {SC_HEAD "protocol: {name: semi2k, exp_iters: 99}\n" SC_NET SC_WORK, ":3:37: error: ",
     "'exp_iters' = 99 is out of range", "between 1 and 16"},
    {SC_HEAD "protocol: {name: semi2k, frac_bits: [12, 30]}\n" SC_NET SC_WORK, ":3:42: error: ",
     "'frac_bits' = 30 is out of range", "between 8 and 24"},
    {SC_HEAD "protocol: {name: semi2k, msb: kss}\n" SC_NET SC_WORK, ":3:31: error: ",
     "unknown 'msb' value 'kss' (did you mean 'ks'?)", NULL},
    {SC_HEAD "protocol: {name: semi2k, beaver_cache: sometimes}\n" SC_NET SC_WORK,
     ":3:40: error: ", "'beaver_cache' must be true or false", NULL},
    {SC_HEAD "protocol: {name: semi2k, softmax_clip: nan}\n" SC_NET SC_WORK, ":3:40: error: ",
     "'softmax_clip' must be a number, not 'nan'", NULL},
    {SC_HEAD "protocol: {nme: semi2k}\n" SC_NET SC_WORK, ":3:12: error: ",
     "unknown key 'nme' in 'protocol' (did you mean 'name'?)", NULL},
    {SC_HEAD SC_PROTO "network: {latency_ms: 1, bandwidth_mbps: 1e300}\n" SC_WORK,
     ":4:42: error: ", "'bandwidth_mbps' = 1e300 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {latency_ms: [1, inf], bandwidth_mbps: 10}\n" SC_WORK,
     ":4:27: error: ", "'latency_ms' must be a number, not 'inf'", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, dealer: {latency_ms: 1, bandwidth_gbs: 1}}\n"
     SC_WORK, ":4:48: error: ", "unknown key 'bandwidth_gbs' in 'dealer'",
     "did you mean 'bandwidth_gbps'?"},
    {SC_HEAD SC_PROTO "network: {preset: lan, links: {0-1: {bandwidth_bps: 10}}}\n" SC_WORK,
     ":4:53: error: ", "'bandwidth_bps' = 10 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, wire: {ack_every: 9223372036854775808}}\n"
     SC_WORK, ":4:42: error: ", "'ack_every' = 9223372036854775808 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, burst_bytes: 18446744073709551616}\n" SC_WORK,
     ":4:37: error: ", "'burst_bytes' = 18446744073709551616 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, nmae: x}\n" SC_WORK, ":4:24: error: ",
     "unknown key 'nmae' in 'network' (did you mean 'name'?)", NULL},
    {SC_BASE "trace: {source: synht}\n", ":6:17: error: ",
     "unknown 'source' value 'synht' (did you mean 'synth'?)", NULL},
    {SC_BASE "trace: {sorce: synth}\n", ":6:9: error: ",
     "unknown key 'sorce' in 'trace' (did you mean 'source'?)", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: [{name: h2o, heavy_ratio: [0.1, 2]}]\n",
     ":7:43: error: ", "'heavy_ratio' = 2 is out of range", "between 0 and 1"},
    {SC_BASE "trace: {source: synth}\npolicies: {name: h2o, heavy_rato: 0.1}\n",
     ":7:23: error: ", "unknown key 'heavy_rato' in 'policy h2o'",
     "did you mean 'heavy_ratio'?"},
    {SC_BASE "trace: {source: synth}\npolicies: {name: snapkv, pooling: minpool}\n",
     ":7:35: error: ", "unknown 'pooling' value 'minpool'", NULL},
    {SC_BASE "policies: {name: full, metric_stride: -1}\n", ":6:39: error: ",
     "'metric_stride' = -1 is out of range", NULL},
    {SC_HEAD SC_PROTO SC_NET SC_WORK "cases:\n  - {seed: 1e300}\n", ":7:12: error: ",
     "'seed' = 1e300 is out of range", NULL},
};

START_TEST(test_scn_bad)
{
    scenario s;
    errbuf e = {{0}};
    int rc = scn_load("s.yaml", scn_bad[_i].text, &s, &e);
    ck_assert_msg(rc == MS_ERR_INPUT, "case %d: rc %d: %s", _i, rc, e.msg);
    check_msg("s.yaml", &scn_bad[_i], e.msg, _i);
    ck_assert_msg(strstr(e.msg, "hint: ") || strstr(e.msg, "did you mean"), "case %d: no hint: %s",
                  _i, e.msg);
    ck_assert_ptr_null(s.runs);
}
END_TEST

/* ---- machine profiles ------------------------------------------------------------------ */

#define M_HEAD "format: mpcsim-machine 1\nname: box\n"                     /* lines 1-2 */
#define M_RATES "mac_per_s: 1e9\nelem_per_s: 5e8\nprg_bytes_per_s: 2e9\n" /* lines 3-5 */

static const bad_case machine_bad[] = {
    {M_HEAD M_RATES "mac_per_sec: 1e9\n", ":6:1: error: ",
     "unknown key 'mac_per_sec' in 'machine profile' (did you mean 'mac_per_s'?)", NULL},
    {M_HEAD M_RATES "threads: 2\nthreads: 4\n", ":7:1: error: ", "duplicate key 'threads'",
     "first defined at line 6:1"},
    {"name: box\n" M_RATES, ":1:1: error: ", "missing required key 'format'",
     "mpcsim calibrate -o FILE"},
    {"format: mpcsim-machine 9\n" M_RATES, ":1:9: error: ",
     "unsupported format 'mpcsim-machine 9' (this mpcsim reads 'mpcsim-machine 1')",
     "mpcsim calibrate -o FILE"},
    {M_HEAD "mac_per_s: -1\nelem_per_s: 5e8\nprg_bytes_per_s: 2e9\n", ":3:12: error: ",
     "'mac_per_s' = -1 is out of range", NULL},
    {M_HEAD "mac_per_s: fast\nelem_per_s: 5e8\nprg_bytes_per_s: 2e9\n", ":3:12: error: ",
     "'mac_per_s' must be a number, not 'fast'", NULL},
    {M_HEAD M_RATES "threads: 0\n", ":6:10: error: ", "'threads' = 0 is out of range",
     "between 1 and 4096"},
    {M_HEAD "mac_per_s: 1e9\nelem_per_s: 5e8\n", ":1:1: error: ",
     "missing required key 'prg_bytes_per_s'", "mpcsim calibrate"},
    {M_HEAD M_RATES "name: other\n", ":6:1: error: ", "duplicate key 'name'", NULL},
    {"- 1\n- 2\n", ":1:1: error: ", "a machine profile is a mapping of keys, not a list", NULL},
    {M_HEAD M_RATES "threads: [1, 2]\n", ":6:10: error: ", "'threads' must be an integer", NULL},
};

START_TEST(test_machine_bad)
{
    const char *path = th_file(&td, "m.yaml", machine_bad[_i].text);
    machine_profile m;
    errbuf e = {{0}};
    ck_assert_int_eq(machine_load(path, &m, &e), MS_ERR_INPUT);
    check_msg(path, &machine_bad[_i], e.msg, _i);
}
END_TEST

START_TEST(test_machine_ok)
{
    const char *path = th_file(&td, "m.yaml", M_HEAD M_RATES "cpu: \"x86 box\"\n"
                                                           "measured: {when: today}\n");
    machine_profile m;
    errbuf e;
    ck_assert_msg(machine_load(path, &m, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(m.name, "box");
    ck_assert_int_eq(m.threads, 1);
    ck_assert_double_eq(m.rate[WK_MAC], 1e9);
    ck_assert_double_eq(m.rate[WK_ELEM], 5e8);
    ck_assert_double_eq(m.rate[WK_PRG], 2e9);
    /* what machine_write writes reads back the same */
    m.threads = 3;
    const char *out = tpath("w.yaml");
    ck_assert_int_eq(machine_write(&m, out, &e), MS_OK);
    machine_profile back;
    ck_assert_msg(machine_load(out, &back, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(back.threads, 3);
    ck_assert_str_eq(back.name, "box");
}
END_TEST

/* ---- synthetic-trace parameter files (trace fit -o, trace synth --params) --------------- */

static const bad_case synth_bad[] = {
    {"sink: 2\nwindw: 3\n", ":2:1: error: ",
     "unknown key 'windw' in 'synthetic trace parameters' (did you mean 'window'?)", NULL},
    {"sink: 2\nsink: 3\n", ":2:1: error: ", "duplicate key 'sink'", NULL},
    {"drift: 1.5\n", ":1:8: error: ", "'drift' = 1.5 is out of range", "between 0 and 1"},
    {"n_sinks: 2.5\n", ":1:10: error: ", "'n_sinks' must be an integer, not '2.5'", NULL},
    {"window: [1, 2]\n", ":1:9: error: ", "'window' must be a number, not a list", NULL},
    {"- sink\n", ":1:1: error: ", "is a mapping of keys, not a list", NULL},
    {"noise: loud\n", ":1:8: error: ", "'noise' must be a number, not 'loud'", NULL},
};

START_TEST(test_synth_bad)
{
    const char *path = th_file(&td, "p.yaml", synth_bad[_i].text);
    trace_synth p, before;
    trace_synth_defaults(&p);
    before = p;
    errbuf e = {{0}};
    ck_assert_int_eq(trace_synth_read_yaml(&p, path, &e), MS_ERR_INPUT);
    check_msg(path, &synth_bad[_i], e.msg, _i);
    ck_assert_int_eq(memcmp(&p, &before, sizeof p), 0); /* nothing half-set */
}
END_TEST

/* ---- serving scenarios (`mpcsim serve`, driven as a user would) ------------------------- */

#define SV_HEAD "name: t\nmodel: gpt2\nprotocol: semi2k\nnetwork: lan\n" /* lines 1-4 */

static const bad_case serve_bad[] = {
    {SV_HEAD "modle: gpt2\n", ":5:1: error: ",
     "unknown key 'modle' in 'serving scenario' (did you mean 'model'?)", NULL},
    {SV_HEAD "workload:\n  requests: 4\n  requests: 5\n", ":7:3: error: ",
     "duplicate key 'requests'", NULL},
    {SV_HEAD "workload:\n  requests: 0\n", ":6:13: error: ", "'requests' = 0 is out of range",
     NULL},
    {SV_HEAD "workload:\n  rate: []\n", ":6:9: error: ", "'rate' needs 1 to 32 values", NULL},
    {SV_HEAD "workload:\n  turn: [8, 4]\n", ":6:9: error: ", "'turn': max is below min", NULL},
    {SV_HEAD "workload:\n  reqests: 4\n", ":6:3: error: ",
     "unknown key 'reqests' in 'workload' (did you mean 'requests'?)", NULL},
    {SV_HEAD "workload: 5\n", ":5:11: error: ", "a workload is a mapping of keys, not a scalar",
     NULL},
    {SV_HEAD "sharing:\n  policies: [none, prefx]\n", ":6:20: error: ",
     "unknown sharing policy 'prefx' (did you mean 'prefix'?)", NULL},
    {SV_HEAD "server:\n  scheduler: lmp\n", ":6:14: error: ",
     "unknown scheduler 'lmp' (did you mean 'lpm'?)", NULL},
    {SV_HEAD "attack:\n  enabled: maybe\n", ":6:12: error: ", "'enabled' must be true or false",
     NULL},
    {SV_HEAD "attack:\n  background_load: 2\n", ":6:20: error: ",
     "'background_load' = 2 is out of range", "between 0 and 0.95"},
    {SV_HEAD "sharing:\n  position: rotate\n", ":6:13: error: ",
     "unknown position treatment 'rotate' (did you mean 'rerotate'?)", NULL},
};

START_TEST(test_serve_bad)
{
    const char *bin = th_bin();
    const char *path = th_file(&td, "s.yaml", serve_bad[_i].text);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' serve s.yaml -o out.db -q 2> err.txt", td.dir,
             bin);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "case %d: status %d", _i, st);
    FILE *f = fopen(tpath("err.txt"), "r");
    ck_assert_ptr_nonnull(f);
    char msg[2048];
    size_t n = fread(msg, 1, sizeof msg - 1, f);
    msg[n] = '\0';
    fclose(f);
    (void)path;
    bad_case c = serve_bad[_i];
    check_msg("s.yaml", &c, msg, _i);
    ck_assert_msg(access(tpath("out.db"), F_OK) != 0, "case %d: a database was written", _i);
}
END_TEST

/* ---- trace manifests --------------------------------------------------------------------
 * A synthetic trace written by the binary, its manifest edited one line at a time (the writer's
 * order: format on line 2, n_layers 5, n_heads 6, n_kv_heads 7, n_tokens 12, rope_layout 14). */

typedef struct manifest_case {
    const char *line, *repl; /* the line replaced (without "\n"), and what replaces it */
    bad_case want;
} manifest_case;

static const manifest_case manifest_bad[] = {
    {"n_tokens: 8", "n_tokens: 8\nn_token: 8",
     {NULL, ":13:1: error: ", "unknown key 'n_token' in 'trace manifest' (did you mean "
      "'n_tokens'?)", NULL}},
    {"n_heads: 8", "n_heads: 8\nn_heads: 8", {NULL, ":7:1: error: ", "duplicate key 'n_heads'",
                                               NULL}},
    {"n_tokens: 8", "", {NULL, ":2:1: error: ", "missing required key 'n_tokens'", "regenerate"}},
    {"n_heads: 8", "n_heads: x", {NULL, ":6:10: error: ", "'n_heads' must be an integer", NULL}},
    {"n_layers: 5", "n_layers: 0", {NULL, ":5:11: error: ", "'n_layers' = 0 is out of range",
                                     NULL}},
    {"n_kv_heads: 4", "n_kv_heads: 3",
     {NULL, ":7:13: error: ", "n_heads (8) must be a multiple of n_kv_heads (3)", NULL}},
    {"format: mpcsim-trace 1", "format: mpcsim-trace 9",
     {NULL, ":2:9: error: ", "trace format 'mpcsim-trace 9' is not supported", "regenerate"}},
    {"rope_layout: interleaved", "rope_layout: hlf",
     {NULL, ":14:14: error: ", "unknown 'rope_layout' value 'hlf' (did you mean 'half'?)", NULL}},
};

START_TEST(test_manifest_bad)
{
    const char *bin = th_bin();
    char cmd[2048], dir[512], man[600];
    snprintf(dir, sizeof dir, "%s", tpath("tr"));
    snprintf(cmd, sizeof cmd, "'%s' trace synth --model stories260K --tokens 8 -o '%s' >/dev/null",
             bin, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(man, sizeof man, "%s/manifest.yaml", dir);
    trace *t = NULL;
    errbuf e;
    ck_assert_msg(trace_open(dir, &t, &e) == MS_OK, "%s", e.msg);
    trace_close(t);
    /* the edit */
    FILE *f = fopen(man, "rb");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 14], edited[1 << 14];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    const manifest_case *c = &manifest_bad[_i];
    char *at = strstr(text, c->line);
    ck_assert_ptr_nonnull(at);
    size_t skip = strlen(c->line) + (c->repl[0] ? 0 : 1); /* an empty repl drops the line */
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - text), text, c->repl, at + skip);
    th_file(&td, "tr/manifest.yaml", edited);
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(t);
    check_msg(man, &c->want, e.msg, _i);
}
END_TEST

/* ---- the docs' key tables agree with the readers' schemas --------------------------------- */

static const char *read_doc(const char *rel) { return th_text(th_data_path(rel)); }

/* TRACE_FORMAT.md's parameter table: the same keys in the same order with the same defaults. */
START_TEST(test_docs_synth_table)
{
    const char *doc = read_doc("sim/trace/TRACE_FORMAT.md");
    const ys_schema *sc = trace_synth_schema();
    const char *at = strstr(doc, "| key | default | meaning |");
    ck_assert_ptr_nonnull(at);
    at = strchr(strchr(at, '\n') + 1, '\n') + 1; /* past the header and the rule */
    for (size_t i = 0; i < sc->n; i++, at = strchr(at, '\n') + 1) {
        char key[64], def[64];
        ck_assert_msg(sscanf(at, "| %63s | %63s |", key, def) == 2, "row %zu: %.60s", i, at);
        ck_assert_str_eq(key, sc->field[i].key);
        double a, b;
        ck_assert(!parse_double(def, &a) && !parse_double(sc->field[i].def, &b));
        ck_assert_msg(a == b, "%s: the doc says %s, the reader %s", key, def, sc->field[i].def);
    }
    ck_assert_msg(strncmp(at, "| ", 2), "the doc lists more parameters than the reader: %.60s", at);
}
END_TEST

/* The key table after section in doc rel (first cells "`key`" or "`a`, `b`") names every key
 * of the schema, and no other. */
static void check_key_table(const char *rel, const char *section, const ys_schema *sc)
{
    const char *doc = read_doc(rel), *t = strstr(doc, section);
    ck_assert_msg(t != NULL, "%s: no section '%s'", rel, section);
    t = strstr(t, "\n| key |");
    ck_assert_msg(t != NULL, "%s: no key table after '%s'", rel, section);
    t = strchr(strchr(t + 1, '\n') + 1, '\n') + 1; /* past the header and the rule */
    char seen[64][64];
    size_t n_seen = 0;
    for (; !strncmp(t, "| `", 3); t = strchr(t, '\n') + 1) {
        size_t cell = strcspn(t + 1, "|");
        for (const char *c = t + 1; (c = memchr(c, '`', (size_t)(t + 1 + cell - c))) != NULL;) {
            char key[64];
            ck_assert_int_eq(sscanf(c + 1, "%63[^`]", key), 1);
            ck_assert_msg(ys_find(sc, key), "%s documents '%s', which the reader does not take",
                          rel, key);
            ck_assert_uint_lt(n_seen, 64);
            snprintf(seen[n_seen++], 64, "%s", key);
            c = strchr(c + 1, '`') + 1;
        }
    }
    for (size_t i = 0; i < sc->n; i++) {
        size_t k = 0;
        while (k < n_seen && strcmp(seen[k], sc->field[i].key))
            k++;
        ck_assert_msg(k < n_seen, "%s's table does not document '%s'", rel, sc->field[i].key);
    }
}

START_TEST(test_docs_key_tables)
{
    check_key_table("models/README.md", "# Models", model_schema());
    check_key_table("scenarios/README.md", "### workload", scn_workload_schema());
}
END_TEST

Suite *inputs_suite(void)
{
    Suite *s = suite_create("inputs");
    TCase *t = tcase_create("files");
    tcase_add_unchecked_fixture(t, suite_setup, suite_teardown);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_loop_test(t, test_scn_bad, 0, (int)(sizeof scn_bad / sizeof *scn_bad));
    tcase_add_loop_test(t, test_machine_bad, 0, (int)(sizeof machine_bad / sizeof *machine_bad));
    tcase_add_test(t, test_machine_ok);
    tcase_add_loop_test(t, test_synth_bad, 0, (int)(sizeof synth_bad / sizeof *synth_bad));
    tcase_add_loop_test(t, test_serve_bad, 0, (int)(sizeof serve_bad / sizeof *serve_bad));
    tcase_add_loop_test(t, test_manifest_bad, 0,
                        (int)(sizeof manifest_bad / sizeof *manifest_bad));
    suite_add_tcase(s, t);
    t = tcase_create("docs");
    tcase_add_test(t, test_docs_synth_table);
    tcase_add_test(t, test_docs_key_tables);
    suite_add_tcase(s, t);
    return s;
}

/* check_inputs.c — every input file but scenarios and models (check_scn.c) read through the
 * schema layer: machine profiles, synthetic-trace parameters, trace manifests and serving
 * scenarios. One table row per kind of mistake, each reported at its file:line:col. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/llama.h"
#include "models/model.h"
#include "protocols/base/yschema.h"
#include "sim/engine/machine.h"
#include "sim/scenario/scn.h"
#include "sim/serve/servescn.h"
#include "sim/trace/trace.h"
#include "sim/cli/cmd.h"
#include "sim/policy/policy.h"
#include "protocols/program/proto.h"
#include "harness.h"

TESTDIR("check_inputs")
static const char *tpath(const char *name) { return testdir_path(&td, name); }

typedef th_bad bad_case;

/* ---- scenario sections (root, protocol, network, trace, policy, sweep axes) -------------
 * Each read through its schema table: the message points at the key or value, names it and
 * hints; a sweep axis's values go through the same table as a fixed key's. */

#define SC_HEAD "name: t\nmodel: stories260K\n"               /* lines 1-2 */
#define SC_PROTO "protocol: semi2k\n"                         /* line 3 */
#define SC_NET "network: lan\n"                               /* line 4 */
#define SC_WORK "workload: {prompt_len: 16, decode_len: 4}\n" /* line 5 */
#define SC_BASE SC_HEAD SC_PROTO SC_NET SC_WORK

static const bad_case scn_bad[] = {
    {SC_BASE "sed: 3\n", ":6:1: error: ", "unknown key 'sed' in 'scenario'",
     "did you mean 'seed'?"},
    {SC_BASE "seed: [1, -1]\n", ":6:11: error: ", "'seed' = -1 is out of range", NULL},
    {SC_BASE "overlap: [true, maybe]\n", ":6:17: error: ", "'overlap' must be true or false", NULL},
    {"format: 2\n" SC_BASE, ":1:9: error: ", "unsupported scenario format 2", NULL},
    {SC_HEAD "protocol: {name: semi2k, exp_iters: 99}\n" SC_NET SC_WORK,
     ":3:37: error: ", "'exp_iters' = 99 is out of range", "between 1 and 16"},
    {SC_HEAD "protocol: {name: semi2k, frac_bits: [12, 30]}\n" SC_NET SC_WORK,
     ":3:42: error: ", "'frac_bits' = 30 is out of range", "between 8 and 24"},
    {SC_HEAD "protocol: {name: semi2k, msb: kss}\n" SC_NET SC_WORK,
     ":3:31: error: ", "unknown 'msb' value 'kss' (did you mean 'ks'?)", NULL},
    {SC_HEAD "protocol: {name: semi2k, beaver_cache: sometimes}\n" SC_NET SC_WORK,
     ":3:40: error: ", "'beaver_cache' must be true or false", NULL},
    {SC_HEAD "protocol: {name: semi2k, softmax_clip: nan}\n" SC_NET SC_WORK,
     ":3:40: error: ", "'softmax_clip' must be a number, not 'nan'", NULL},
    {SC_HEAD "protocol: {nme: semi2k}\n" SC_NET SC_WORK,
     ":3:12: error: ", "unknown key 'nme' in 'protocol' (did you mean 'name'?)", NULL},
    {SC_HEAD SC_PROTO "network: {latency_ms: 1, bandwidth_mbps: 1e300}\n" SC_WORK,
     ":4:42: error: ", "'bandwidth_mbps' = 1e300 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {latency_ms: [1, inf], bandwidth_mbps: 10}\n" SC_WORK,
     ":4:27: error: ", "'latency_ms' must be a number, not 'inf'", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, dealer: {latency_ms: 1, bandwidth_gbs: 1}}\n" SC_WORK,
     ":4:48: error: ", "unknown key 'bandwidth_gbs' in 'dealer'", "did you mean 'bandwidth_gbps'?"},
    {SC_HEAD SC_PROTO "network: {preset: lan, links: {0-1: {bandwidth_bps: 10}}}\n" SC_WORK,
     ":4:53: error: ", "'bandwidth_bps' = 10 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, wire: {ack_every: 9223372036854775808}}\n" SC_WORK,
     ":4:42: error: ", "'ack_every' = 9223372036854775808 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, burst_bytes: 18446744073709551616}\n" SC_WORK,
     ":4:37: error: ", "'burst_bytes' = 18446744073709551616 is out of range", NULL},
    {SC_HEAD SC_PROTO "network: {preset: lan, nmae: x}\n" SC_WORK,
     ":4:24: error: ", "unknown key 'nmae' in 'network' (did you mean 'name'?)", NULL},
    {SC_BASE "trace: {source: synht}\n",
     ":6:17: error: ", "unknown 'source' value 'synht' (did you mean 'synth'?)", NULL},
    {SC_BASE "trace: {sorce: synth}\n",
     ":6:9: error: ", "unknown key 'sorce' in 'trace' (did you mean 'source'?)", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: [{name: h2o, heavy_ratio: [0.1, 2]}]\n",
     ":7:43: error: ", "'heavy_ratio' = 2 is out of range", "between 0 and 1"},
    {SC_BASE "trace: {source: synth}\npolicies: {name: h2o, heavy_rato: 0.1}\n",
     ":7:23: error: ", "unknown key 'heavy_rato' in 'policy h2o'", "did you mean 'heavy_ratio'?"},
    {SC_BASE "trace: {source: synth}\npolicies: {name: snapkv, pooling: minpool}\n",
     ":7:35: error: ", "unknown 'pooling' value 'minpool'", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: {name: streamingllm, sink: 2.5}\n",
     ":7:38: error: ", "'sink' must be a whole number, not '2.5'", NULL},
    {SC_BASE "policies: {name: full, metric_stride: -1}\n",
     ":6:39: error: ", "'metric_stride' = -1 is out of range", NULL},
    /* rules between a policy's parameters (policy_check: kv_budget's, the check hooks) */
    {SC_BASE "trace: {source: synth}\npolicies: {name: mpcache, s1: 20, s2: 16}\n",
     ":7:27: error: ", "policy mpcache needs s1 = 2·s2 (got s1 = 20, s2 = 16)", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: {name: h2o, kv_budget: 0.1, heavy: 8}\n",
     ":7:39: error: ", "policy h2o: 'heavy' and 'kv_budget' both set the budget", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: {name: quest, kv_budget: [0.1, 0]}\n",
     ":7:25: error: ", "'kv_budget' = 0 must be above 0", NULL},
    {SC_BASE "policies: {name: full, kv_budget: 0.5}\n",
     ":6:24: error: ", "kv_budget 0.5 cannot apply", NULL},
    {SC_BASE "trace: {source: synth}\npolicies: {name: mpcache, static: threshold, kv_budget: 1}\n",
     ":7:27: error: ", "'static: threshold' keeps a data-dependent share", NULL},
    /* a policy's rules against the run's workload (its init at load, not a failed run) */
    {SC_BASE "trace: {source: synth}\npolicies: {name: snapkv, kv_budget: [0.5, 0.2], window: 8}\n",
     ":7:26: error: ",
     "kv_budget 0.2 of a 16-entry prompt keeps 3 entries, fewer than the observation window 8",
     NULL},
    {SC_HEAD SC_PROTO SC_NET SC_WORK "cases:\n  - {seed: 1e300}\n",
     ":7:12: error: ", "'seed' = 1e300 is out of range", NULL},
};

START_TEST(test_scn_bad)
{
    scenario s;
    errbuf e = {{0}};
    int rc = scn_load("s.yaml", scn_bad[_i].text, &s, &e);
    ck_assert_msg(rc == MS_ERR_INPUT, "case %d: rc %d: %s", _i, rc, e.msg);
    th_bad_msg("s.yaml", &scn_bad[_i], e.msg, _i);
    ck_assert_msg(strstr(e.msg, "hint: ") || strstr(e.msg, "did you mean"), "case %d: no hint: %s",
                  _i, e.msg);
    ck_assert_ptr_null(s.runs);
}
END_TEST

/* A file the scenario names (a model file) keeps its own place in the message. */
START_TEST(test_scn_nested_file)
{
    const char *m = th_file(&td, "m.yaml",
                            "format: mpcsim-model 1\nname: m\nlayers: -2\ndim: 8\nheads: 2\n"
                            "ffn_dim: 16\nvocab: 32\nmax_context: 64\n");
    char text[1024], want[700];
    snprintf(text, sizeof text, "name: t\nmodel: %s\n" SC_PROTO SC_NET SC_WORK, m);
    scenario sc;
    errbuf e = {{0}};
    ck_assert_int_eq(scn_load("s.yaml", text, &sc, &e), MS_ERR_INPUT);
    snprintf(want, sizeof want, "s.yaml:2:8: error: cannot load model: %s:3:9: 'layers' = -2", m);
    ck_assert_msg(!strncmp(e.msg, want, strlen(want)), "want '%s' in: %s", want, e.msg);
}
END_TEST

/* ---- machine profiles ------------------------------------------------------------------ */

#define M_HEAD "format: mpcsim-machine 1\nname: box\n"                    /* lines 1-2 */
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
    {M_HEAD "mac_per_s: -1\nelem_per_s: 5e8\nprg_bytes_per_s: 2e9\n",
     ":3:12: error: ", "'mac_per_s' = -1 is out of range", NULL},
    {M_HEAD "mac_per_s: fast\nelem_per_s: 5e8\nprg_bytes_per_s: 2e9\n",
     ":3:12: error: ", "'mac_per_s' must be a number, not 'fast'", NULL},
    {M_HEAD M_RATES "threads: 0\n", ":6:10: error: ", "'threads' = 0 is out of range",
     "between 1 and 4096"},
    {M_HEAD "mac_per_s: 1e9\nelem_per_s: 5e8\n",
     ":1:1: error: ", "missing required key 'prg_bytes_per_s'", "mpcsim calibrate"},
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
    th_bad_msg(path, &machine_bad[_i], e.msg, _i);
}
END_TEST

START_TEST(test_machine_ok)
{
    const char *path = th_file(&td, "m.yaml",
                               M_HEAD M_RATES "cpu: \"x86 box\"\n"
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
    th_bad_msg(path, &synth_bad[_i], e.msg, _i);
    ck_assert_int_eq(memcmp(&p, &before, sizeof p), 0); /* nothing half-set */
}
END_TEST

/* ---- serving scenarios (`mpcsim serve`, driven as a user would) ------------------------- */

#define SV_HEAD "name: t\nmodel: gpt2\nprotocol: semi2k\nnetwork: lan\n" /* lines 1-4 */

static const bad_case serve_bad[] = {
    {SV_HEAD "modle: gpt2\n",
     ":5:1: error: ", "unknown key 'modle' in 'serving scenario' (did you mean 'model'?)", NULL},
    {SV_HEAD "workload:\n  requests: 4\n  requests: 5\n",
     ":7:3: error: ", "duplicate key 'requests'", NULL},
    {SV_HEAD "workload:\n  requests: 0\n", ":6:13: error: ", "'requests' = 0 is out of range",
     NULL},
    {SV_HEAD "workload:\n  rate: []\n", ":6:9: error: ", "'rate' needs 1 to 32 values", NULL},
    {SV_HEAD "workload:\n  turn: [8, 4]\n", ":6:9: error: ", "'turn': max is below min", NULL},
    {SV_HEAD "workload:\n  reqests: 4\n",
     ":6:3: error: ", "unknown key 'reqests' in 'workload' (did you mean 'requests'?)", NULL},
    {SV_HEAD "workload: 5\n", ":5:11: error: ", "a workload is a mapping of keys, not a scalar",
     NULL},
    {SV_HEAD "sharing:\n  policies: [none, prefx]\n",
     ":6:20: error: ", "unknown sharing policy 'prefx' (did you mean 'prefix'?)", NULL},
    {SV_HEAD "server:\n  scheduler: lmp\n",
     ":6:14: error: ", "unknown scheduler 'lmp' (did you mean 'lpm'?)", NULL},
    {SV_HEAD "attack:\n  enabled: maybe\n", ":6:12: error: ", "'enabled' must be true or false",
     NULL},
    {SV_HEAD "attack:\n  background_load: 2\n",
     ":6:20: error: ", "'background_load' = 2 is out of range", "between 0 and 0.95"},
    {SV_HEAD "sharing:\n  position: rotate\n",
     ":6:13: error: ", "unknown position treatment 'rotate' (did you mean 'rerotate'?)", NULL},
};

START_TEST(test_serve_bad)
{
    const char *bin = th_bin();
    const char *path = th_file(&td, "s.yaml", serve_bad[_i].text);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' serve s.yaml -o out.db -q 2> err.txt", td.dir, bin);
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
    th_bad_msg("s.yaml", &c, msg, _i);
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
    {"n_tokens: 8",
     "n_tokens: 8\nn_token: 8",
     {NULL, ":13:1: error: ",
      "unknown key 'n_token' in 'trace manifest' (did you mean "
      "'n_tokens'?)",
      NULL}},
    {"n_heads: 8",
     "n_heads: 8\nn_heads: 8",
     {NULL, ":7:1: error: ", "duplicate key 'n_heads'", NULL}},
    {"n_tokens: 8", "", {NULL, ":2:1: error: ", "missing required key 'n_tokens'", "regenerate"}},
    {"n_heads: 8", "n_heads: x", {NULL, ":6:10: error: ", "'n_heads' must be an integer", NULL}},
    {"n_layers: 5",
     "n_layers: 0",
     {NULL, ":5:11: error: ", "'n_layers' = 0 is out of range", NULL}},
    {"n_kv_heads: 4",
     "n_kv_heads: 3",
     {NULL, ":7:13: error: ", "n_heads (8) must be a multiple of n_kv_heads (3)", NULL}},
    {"format: mpcsim-trace 1",
     "format: mpcsim-trace 9",
     {NULL, ":2:9: error: ", "trace format 'mpcsim-trace 9' is not supported", "regenerate"}},
    {"rope_layout: interleaved",
     "rope_layout: hlf",
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
    th_bad_msg(man, &c->want, e.msg, _i);
}
END_TEST

/* ---- every numeric key of every input, out of range ----------------------------------------
 * Driven by the schema tables themselves, so a key added to a table is audited too: each numeric
 * field must have a range (integers at least their type's), and each value outside it — below,
 * above, negative, 1e300, 2^63, 2^64, nan, inf — is refused at its file:line:col with the key
 * named. A site is a file kind with a template: "@" marks the line where "KEY: VALUE" goes
 * (a line of the template at that indentation already setting KEY is dropped). Writing
 * commands are also run once per key through the binary: exit 2, the message, nothing
 * written. */

enum { L_SCN, L_MODEL, L_MACHINE, L_SYNTH, L_MANIFEST, L_SERVE };

typedef struct key_site {
    const char *what;
    const ys_schema *schema;
    const char *tmpl;
    int load;
    const char *const *skip; /* keys not fed at this site (NULL-terminated), or NULL */
} key_site;

/* Integer fields whose range is their whole type: seeds. */
static int whole_type_ok(const ys_field *f) { return !strcmp(f->key, "seed"); }

static int numeric(const ys_field *f)
{
    return f->type == YS_U32 || f->type == YS_U64 || f->type == YS_INT || f->type == YS_DBL;
}

/* The field's accepted range, as the reader applies it. */
static void field_range(const ys_field *f, double *lo, double *hi)
{
    int unb = f->lo == 0 && f->hi == 0;
    switch (f->type) {
    case YS_U32:
        *lo = unb ? 0 : f->lo;
        *hi = unb ? 4294967295.0 : f->hi;
        break;
    case YS_U64:
        *lo = unb ? 0 : f->lo;
        *hi = unb ? 18446744073709551615.0 : f->hi;
        break;
    case YS_INT:
        *lo = unb ? -2147483648.0 : f->lo;
        *hi = unb ? 2147483647.0 : f->hi;
        break;
    default:
        *lo = f->lo;
        *hi = f->hi;
        break;
    }
}

/* Values outside the field's range: fills out[][32], returns the count. */
static size_t bad_values(const ys_field *f, char out[][32], size_t max)
{
    static const char *const fixed[] = {
        "-1",  "1e300", "-1e300", "9223372036854775808", "18446744073709551616", "nan",
        "inf", "-inf",  "1e-300"};
    double lo, hi;
    field_range(f, &lo, &hi);
    int integer = f->type != YS_DBL || (f->flags & YS_WHOLE);
    char cand[16][32];
    size_t n = 0, k = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        snprintf(cand[n++], 32, "%s", fixed[i]);
    if (integer) { /* just outside each end */
        snprintf(cand[n++], 32, "%.0f", lo - 1);
        snprintf(cand[n++], 32, "%.0f", hi + 1);
    } else {
        snprintf(cand[n++], 32, "%.17g", lo > 0 ? lo / 2 : lo - (fabs(lo) > 1 ? fabs(lo) : 1));
        snprintf(cand[n++], 32, "%.17g", hi > 0 ? hi * 2 : hi < 0 ? hi / 2 : 1);
    }
    for (size_t i = 0; i < n && k < max; i++) {
        double d;
        int bad = parse_double(cand[i], &d) != 0 || d < lo || d > hi || (integer && d != floor(d));
        /* %.0f of lo - 1 at a type's end rounds back into it: only values really outside */
        if (bad)
            snprintf(out[k++], 32, "%s", cand[i]);
    }
    return k;
}

/* The template with KEY: VAL at "@" (a line at that indentation setting KEY dropped); *line
 * and *col: where VAL starts. */
static void fill_template(const char *tmpl, const char *key, const char *val, char *out, size_t cap,
                          int *line, int *col)
{
    const char *at = strchr(tmpl, '@');
    ck_assert_ptr_nonnull(at);
    const char *bol = at;
    while (bol > tmpl && bol[-1] != '\n')
        bol--;
    int indent = (int)(at - bol), ln = 1;
    size_t o = 0;
    char same[80];
    snprintf(same, sizeof same, "%*s%s:", indent, "", key);
    for (const char *p = tmpl; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
        if (p == bol) {
            o += (size_t)snprintf(out + o, cap - o, "%*s%s: %s\n", indent, "", key, val);
            *line = ln;
            *col = indent + (int)strlen(key) + 3;
            ln++;
        } else if (strncmp(p, same, strlen(same))) { /* not the key at the same depth */
            o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)len, p);
            ln++;
        }
        p += len;
    }
    ck_assert_uint_lt(o, cap - 1);
}

static const char *const replay_keys[] = {"metric_stride", "err_kv_heads", "prompt_rows",
                                          "recall_k",      "live",         NULL};

#define K_SCN "name: t\nmodel: stories260K\nprotocol: semi2k\nnetwork: lan\n"
#define K_WORK "workload: {prompt_len: 16, decode_len: 4}\n"

/* The fixed sites, the serving sections and one per registered policy: sized from the registry
 * when built, so that a policy added to it is checked like the others, with no count here. */
static key_site *sites;
static size_t n_sites;
static char (*policy_tmpl)[256];

static void build_sites(void)
{
    if (n_sites)
        return;
    size_t n_net, n_serve, n_pol;
    const ys_schema *net = scn_network_schemas(&n_net), *sv = serve_scenario_schemas(&n_serve);
    const policy_ops *const *pol = policy_all(&n_pol);
    const key_site fixed[] = {
        {"scenario", scn_schema(), K_SCN K_WORK "@\n", L_SCN, NULL},
        {"scenario protocol", proto_cfg_schema(),
         "name: t\nmodel: stories260K\nprotocol:\n  name: semi2k\n  @\nnetwork: lan\n" K_WORK,
         L_SCN, NULL},
        {"scenario network", &net[0],
         "name: t\nmodel: stories260K\nprotocol: semi2k\nnetwork:\n  preset: lan\n  @\n" K_WORK,
         L_SCN, NULL},
        {"scenario link", &net[1],
         "name: t\nmodel: stories260K\nprotocol: semi2k\nnetwork:\n  preset: lan\n  links:\n"
         "    0->1:\n      @\n" K_WORK,
         L_SCN, NULL},
        {"scenario dealer link", &net[1],
         "name: t\nmodel: stories260K\nprotocol: semi2k\nnetwork:\n  preset: lan\n  dealer:\n"
         "    @\n" K_WORK,
         L_SCN, NULL},
        {"scenario wire", &net[2],
         "name: t\nmodel: stories260K\nprotocol: semi2k\nnetwork:\n  preset: lan\n  wire:\n"
         "    @\n" K_WORK,
         L_SCN, NULL},
        {"scenario workload", scn_workload_schema(),
         K_SCN "workload:\n  prompt_len: 16\n  decode_len: 4\n  @\n", L_SCN, NULL},
        {"scenario inline model", model_schema(),
         "name: t\nmodel:\n  base: stories260K\n  @\nprotocol: semi2k\nnetwork: lan\n" K_WORK,
         L_SCN, NULL},
        {"model file", model_schema(),
         "format: mpcsim-model 1\nname: m\nlayers: 2\ndim: 8\nheads: 2\nffn_dim: 16\n"
         "vocab: 32\nmax_context: 64\n@\n",
         L_MODEL, NULL},
        {"machine profile", machine_schema(), M_HEAD M_RATES "@\n", L_MACHINE, NULL},
        {"synthetic trace parameters", trace_synth_schema(), "@\n", L_SYNTH, NULL},
        {"trace manifest", trace_manifest_schema(), NULL, L_MANIFEST, NULL},
    };
    sites = calloc(sizeof fixed / sizeof *fixed + n_serve + n_pol, sizeof *sites);
    policy_tmpl = calloc(n_pol ? n_pol : 1, sizeof *policy_tmpl);
    if (!sites || !policy_tmpl) /* built when the suite is, outside any test */
        abort();
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        sites[n_sites++] = fixed[i];
    /* serving scenario sections: the root, then each section's mapping */
    static const char *const sv_sect[] = {NULL, "workload", "server", "sharing", "attack"};
    static char sv_tmpl[8][256];
    for (size_t i = 0; i < n_serve && i < 5; i++) {
        if (sv_sect[i])
            snprintf(sv_tmpl[i], sizeof sv_tmpl[i], SV_HEAD "%s:\n  @\n", sv_sect[i]);
        else
            snprintf(sv_tmpl[i], sizeof sv_tmpl[i], SV_HEAD "@\n");
        sites[n_sites++] = (key_site){"serving scenario", &sv[i], sv_tmpl[i], L_SERVE, NULL};
    }
    /* each policy's parameters; the replay's (shared by all) once, under full */
    for (size_t i = 0; i < n_pol; i++) {
        snprintf(policy_tmpl[i], sizeof policy_tmpl[i],
                 K_SCN K_WORK "trace: {source: synth}\npolicies:\n  name: %s\n  @\n",
                 policy_name(pol[i]));
        sites[n_sites++] = (key_site){"policy", policy_schema(pol[i]), policy_tmpl[i], L_SCN,
                                      strcmp(policy_name(pol[i]), "full") ? replay_keys : NULL};
    }
}

static int skipped(const key_site *st, const char *key)
{
    for (size_t i = 0; st->skip && st->skip[i]; i++)
        if (!strcmp(st->skip[i], key))
            return 1;
    return 0;
}

/* The manifest of a small synthetic trace written by the binary (into dir). */
static char *manifest_template(const char *dir)
{
    char cmd[2048], man[600];
    snprintf(cmd, sizeof cmd, "'%s' trace synth --model stories260K --tokens 8 -o '%s' >/dev/null",
             th_bin(), dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(man, sizeof man, "%s/manifest.yaml", dir);
    char *text = th_slurp(man, NULL), *t = malloc(strlen(text) + 3);
    ck_assert_ptr_nonnull(t);
    sprintf(t, "%s@\n", text); /* the key goes last */
    free(text);
    return t;
}

/* Loads the file in process; returns the code (the message in e). */
static int load_site(const key_site *st, const char *path, const char *dir, errbuf *e)
{
    switch (st->load) {
    case L_SCN: {
        scenario sc;
        int rc = scn_load(path, NULL, &sc, e);
        if (!rc)
            scn_free(&sc);
        return rc;
    }
    case L_MODEL: {
        model_cfg m;
        return model_load(path, &m, e);
    }
    case L_MACHINE: {
        machine_profile m;
        return machine_load(path, &m, e);
    }
    case L_SYNTH: {
        trace_synth p;
        trace_synth_defaults(&p);
        return trace_synth_read_yaml(&p, path, e);
    }
    case L_MANIFEST: {
        trace *t = NULL;
        int rc = trace_open(dir, &t, e);
        if (!rc)
            trace_close(t);
        return rc;
    }
    default: return MS_ERR_INTERNAL;
    }
}

/* The binary on the file: exit 2, the message at the value naming the key, nothing written. */
static void cli_site(const key_site *st, const char *file, const char *want, const char *key)
{
    char cmd[2048], out[600], errf[600];
    snprintf(out, sizeof out, "%s", tpath("out"));
    snprintf(errf, sizeof errf, "%s", tpath("err.txt"));
    if (st->load == L_SERVE)
        snprintf(cmd, sizeof cmd, "'%s' serve '%s' -o '%s' -q 2> '%s'", th_bin(), file, out, errf);
    else if (st->load == L_SCN)
        snprintf(cmd, sizeof cmd, "'%s' run '%s' -o '%s' --quiet 2> '%s'", th_bin(), file, out,
                 errf);
    else /* synth parameters: trace synth --params writes a trace */
        snprintf(cmd, sizeof cmd,
                 "'%s' trace synth --model stories260K --tokens 8 --params '%s' -o '%s' "
                 "> /dev/null 2> '%s'",
                 th_bin(), file, out, errf);
    int status = system(cmd);
    const char *msg = th_text(errf);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%s '%s': exit %d: %s", st->what,
                  key, status, msg);
    ck_assert_msg(strstr(msg, want) && strstr(msg, key), "%s '%s': want '%s' in: %s", st->what, key,
                  want, msg);
    ck_assert_msg(access(out, F_OK) != 0, "%s '%s': %s was written", st->what, key, out);
}

START_TEST(test_numeric_out_of_range)
{
    build_sites();
    ck_assert_int_lt(_i, (int)n_sites);
    const key_site *st = &sites[_i];
    const char *dir = tpath("tr"), *tmpl = st->tmpl;
    char *man = NULL;
    if (st->load == L_MANIFEST)
        tmpl = man = manifest_template(dir);
    char path[600];
    snprintf(path, sizeof path, "%s",
             st->load == L_MANIFEST ? testdir_path(&td, "tr/manifest.yaml") : tpath("f.yaml"));
    static char text[1 << 14];
    for (size_t i = 0; i < st->schema->n; i++) {
        const ys_field *f = &st->schema->field[i];
        if (!numeric(f) || skipped(st, f->key))
            continue;
        ck_assert_msg(!(f->type == YS_DBL && f->lo == 0 && f->hi == 0),
                      "%s: number '%s' has no range", st->what, f->key);
        ck_assert_msg(!(f->lo == 0 && f->hi == 0) || whole_type_ok(f),
                      "%s: integer '%s' has no range of its own", st->what, f->key);
        char bad[16][32];
        size_t nb = bad_values(f, bad, 16);
        ck_assert_msg(nb >= 6, "%s '%s': only %zu bad values", st->what, f->key, nb);
        for (size_t b = 0; b < nb; b++) {
            int line = 0, col = 0;
            fill_template(tmpl, f->key, bad[b], text, sizeof text, &line, &col);
            th_write(path, text);
            char at[700], key[80];
            snprintf(at, sizeof at, "%s:%d:%d: error: ", path, line, col);
            snprintf(key, sizeof key, "'%s'", f->key);
            if (st->load == L_SERVE) { /* only the binary reads serving scenarios */
                cli_site(st, path, at, key);
                continue;
            }
            errbuf e = {{0}};
            int rc = load_site(st, path, dir, &e);
            ck_assert_msg(rc == (st->load == L_MANIFEST ? MS_ERR_FORMAT : MS_ERR_INPUT),
                          "%s '%s' = %s: rc %d: %s", st->what, f->key, bad[b], rc, e.msg);
            ck_assert_msg(!strncmp(e.msg, at, strlen(at)) && strstr(e.msg, key),
                          "%s '%s' = %s: want '%s…%s' in: %s", st->what, f->key, bad[b], at, key,
                          e.msg);
            if (b == 0 && (st->load == L_SCN || st->load == L_SYNTH))
                cli_site(st, path, at, key);
        }
    }
    free(man);
}
END_TEST

/* The counts for the record (each site's test above feeds them all). */
START_TEST(test_numeric_summary)
{
    build_sites();
    size_t keys = 0, values = 0;
    for (size_t i = 0; i < n_sites; i++)
        for (size_t k = 0; k < sites[i].schema->n; k++) {
            const ys_field *f = &sites[i].schema->field[k];
            char bad[16][32];
            if (numeric(f) && !skipped(&sites[i], f->key)) {
                keys++;
                values += bad_values(f, bad, 16);
            }
        }
    printf("inputs: %zu numeric keys at %zu sites, %zu out-of-range values refused\n", keys,
           n_sites, values);
    ck_assert_uint_gt(keys, 100);
}
END_TEST

/* ---- command-line numbers: each option's range from its table (sim/cli/opt.h) ---------- */

static const struct {
    const char *args, *want;
} cli_bad[] = {
    {"serve -n 3 --rate 1e300 -q", "--rate wants a rate in [1e-12, 1e9]"},
    {"serve -n 3 --rate nan -q", "--rate wants"},
    {"serve -n 10000001 -q", "--requests wants an integer in [1, 10000000]"},
    {"serve -n 3 --chunk 4194305 -q", "--chunk wants an integer in [0, 4194304]"},
    {"serve -n 3 --seed 18446744073709551616 -q", "--seed wants"},
    {"list protocols --costs -n 16777217", "--elems wants an element count in [1, 16777216]"},
    {"trace synth -m gpt2 --tokens 4294967296 --stats", "--tokens wants an integer in"},
    {"trace synth -m gpt2 --tokens -1 --stats", "--tokens wants an integer in"},
    {"cost --model stories260K --protocol semi2k --network lan --kv 1e300", "--kv wants"},
    {"cost --model stories260K --protocol semi2k --network lan --batch 65537", "--batch wants"},
    {"cost --model stories260K --protocol semi2k --network lan --threads inf", "--threads wants"},
    {"run x.yaml -j 0", "--jobs wants"},
    /* a policy parameter given on the command line is reported naming the argument */
    {"validate --model stories260K --accuracy 20 --prompt 10 --policy h2o --policy-param "
     "heavy=abc",
     "error: --policy-param heavy=abc: policy h2o parameter 'heavy' wants a number"},
    {"validate --model stories260K --accuracy 20 --prompt 10 --policy h2o --policy-param "
     "bogus=1",
     "error: --policy-param bogus=1: unknown parameter 'bogus' for policy h2o"},
    {"validate --model stories260K --accuracy 20 --prompt 10 --policy h2o --policy-param heavy",
     "error: --policy-param wants KEY=VALUE (a policy parameter), not 'heavy'"},
};

START_TEST(test_cli_numbers)
{
    char out[4096];
    ck_assert_int_eq(th_cli_capture(cli_bad[_i].args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, cli_bad[_i].want), "'%s': want '%s' in: %s", cli_bad[_i].args,
                  cli_bad[_i].want, out);
}
END_TEST

/* ---- the float reference's binary checkpoint ---------------------------------------------
 * A binary file's errors give line 1 and the 1-based byte offset as the column: a header
 * field's mistake points at the field, a file too short for the header at its start. */

static const struct {
    int field; /* the int32 header field changed (-1: the file cut to `cut` bytes) */
    int32_t value;
    size_t cut;
    const char *where, *gist;
} ckpt_bad[] = {
    {0, 65, 0, ":1:1: error: ", "checkpoint header dim = 65 but model 'stories260K' says 64"},
    {2, 7, 0, ":1:9: error: ", "checkpoint header n_layers = 7"},
    {6, 1, 0, ":1:25: error: ", "checkpoint header seq_len = 1"},
    {5, -512, 0, ":1:21: error: ", "checkpoint has a separate classifier"},
    {-1, 0, 20, ":1:1: error: ", "not a llama2.c checkpoint (size 20"},
    {-1, 0, 31, ":1:1: error: ", "not a llama2.c checkpoint (size 31"},
};

START_TEST(test_checkpoint_bad)
{
    model_cfg cfg;
    errbuf e;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    size_t len;
    char *ck = th_slurp(th_data_path("models/stories260K/stories260K.bin"), &len);
    ck_assert_uint_gt(len, 28);
    if (ckpt_bad[_i].field >= 0)
        memcpy(ck + 4 * ckpt_bad[_i].field, &ckpt_bad[_i].value, 4);
    else
        len = ckpt_bad[_i].cut;
    const char *path = tpath("bad.bin");
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(ck, 1, len, f), len);
    fclose(f);
    free(ck);
    llama *m = NULL;
    ck_assert_int_eq(llama_load(&cfg, path, &m, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(m);
    bad_case c = {NULL, ckpt_bad[_i].where, ckpt_bad[_i].gist, NULL};
    th_bad_msg(path, &c, e.msg, _i);
    remove(path);
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
    check_key_table("scenarios/README.md", "## Keys", scn_schema());
    check_key_table("scenarios/README.md", "### protocol", proto_cfg_schema());
    size_t n_net;
    check_key_table("scenarios/README.md", "### network", &scn_network_schemas(&n_net)[0]);
    check_key_table("scenarios/README.md", "### trace", scn_trace_schema());
}
END_TEST

Suite *inputs_suite(void)
{
    Suite *s = suite_create("inputs");
    TCase *t = th_case(s, "files", 0);
    TESTDIR_USE(t);
    TH_LOOPS(t, (int)(sizeof scn_bad / sizeof *scn_bad), test_scn_bad);
    TH_TESTS(t, test_scn_nested_file);
    TH_LOOPS(t, (int)(sizeof machine_bad / sizeof *machine_bad), test_machine_bad);
    TH_TESTS(t, test_machine_ok);
    TH_LOOPS(t, (int)(sizeof synth_bad / sizeof *synth_bad), test_synth_bad);
    TH_LOOPS(t, (int)(sizeof serve_bad / sizeof *serve_bad), test_serve_bad);
    TH_LOOPS(t, (int)(sizeof manifest_bad / sizeof *manifest_bad), test_manifest_bad);
    build_sites();
    t = th_case(s, "ranges", 120);
    TESTDIR_USE(t);
    TH_LOOPS(t, (int)n_sites, test_numeric_out_of_range);
    TH_TESTS(t, test_numeric_summary);
    TH_LOOPS(t, (int)(sizeof cli_bad / sizeof *cli_bad), test_cli_numbers);
    TH_LOOPS(t, TH_N(ckpt_bad), test_checkpoint_bad);
    t = th_case(s, "docs", 0);
    TH_TESTS(t, test_docs_synth_table, test_docs_key_tables);
    return s;
}

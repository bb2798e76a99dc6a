/* check_scn.c — scenario files: every kind of bad input reported at its exact line:col, sweep
 * expansion (grid and zip), canonical YAML and hash, round trips, and `mpcsim list`. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sim/policy/policy.h"
#include "sim/scenario/scn.h"
#include "protocols/base/yamlx.h"

TESTDIR("check_scn")

/* The scenario every error case starts from (line numbers below count from here). */
#define BASE_MODEL "model: stories260K\n"                          /* line 2 */
#define BASE_PROTO "protocol: semi2k\n"                            /* line 3 */
#define BASE_NET "network: lan\n"                                  /* line 4 */
#define BASE_WORK "workload:\n  prompt_len: 16\n  decode_len: 4\n" /* lines 5-7 */

static int load(const char *text, scenario *s, errbuf *e) { return scn_load("s.yaml", text, s, e); }

/* text loads (as s.yaml) into s, with n_runs runs (< 0: any number). */
static void load_ok(const char *text, scenario *s, int n_runs)
{
    errbuf e;
    ck_assert_msg(load(text, s, &e) == MS_OK, "%s", e.msg);
    if (n_runs >= 0)
        ck_assert_uint_eq(s->n_runs, (unsigned)n_runs);
}

/* ---- bad input: one row per kind of mistake -------------------------------------------- */

typedef th_bad bad_case; /* where: "s.yaml:L:C: error: " */

static const bad_case bad_cases[] = {
    /* unknown keys, with did-you-mean */
    {"name: t\n" BASE_MODEL BASE_PROTO "netwrok: lan\n" BASE_WORK,
     "s.yaml:4:1: error: ", "unknown key 'netwrok' in 'scenario'", "did you mean 'network'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload:\n  promt_len: 16\n  decode_len: 4\n",
     "s.yaml:6:3: error: ", "unknown key 'promt_len' in 'workload'", "did you mean 'prompt_len'?"},
    {"name: t\n" BASE_MODEL "protocol: {name: aby3, frac_bit: 16}\n" BASE_NET BASE_WORK,
     "s.yaml:3:24: error: ", "unknown key 'frac_bit' in 'protocol'", "did you mean 'frac_bits'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {latency_ms: 1, bandwidth_mbps: 20, burst_byte: 3100}\n" BASE_WORK,
     "s.yaml:4:46: error: ", "unknown key 'burst_byte' in 'network'",
     "did you mean 'burst_bytes'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {latency_ms: 1, bandwidth_mbps: 20, burst_bytes: 100}\n" BASE_WORK,
     "s.yaml:4:59: error: ", "'burst_bytes' = 100 is below one frame", "write 0 (no bucket)"},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {preset: lan, links: {0->1: {burst_bytes: -1}}}\n" BASE_WORK,
     "s.yaml:4:52: error: ", "'burst_bytes' = -1 is out of range", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {latency_ms: 1, bandwidth_mbps: 20, wire: tpc}\n" BASE_WORK,
     "s.yaml:4:52: error: ", "unknown wire framing 'tpc' (did you mean 'tcp'?)", "wire: none"},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {latency_ms: 1, bandwidth_mbps: 20, wire: {mtu: 100}}\n" BASE_WORK,
     "s.yaml:4:58: error: ", "'mtu' = 100 is out of range", "between 576 and 65535"},
    {"name: t\n" BASE_MODEL BASE_PROTO
     "network: {latency_ms: 1, bandwidth_mbps: 20, wire: {mss: 1448}}\n" BASE_WORK,
     "s.yaml:4:53: error: ", "unknown key 'mss' in 'wire'", "keys of 'wire': mtu"},
    /* wrong types */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload: 5\n",
     "s.yaml:5:11: error: ", "'workload' must be a mapping, not a scalar", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET
     "workload:\n  prompt_len: {a: 1}\n  decode_len: 4\n",
     "s.yaml:6:15: error: ", "'prompt_len' must be an integer, not a mapping", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload:\n  prompt_len: 16\n  decode_len: 4.5\n",
     "s.yaml:7:15: error: ", "'decode_len' must be an integer, not '4.5'", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "policies: [[full]]\n",
     "s.yaml:8:12: error: ", "a list inside a list", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "overlap: maybe\n",
     "s.yaml:8:10: error: ", "'overlap' must be true or false", NULL},
    /* out of range */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload:\n  prompt_len: -5\n  decode_len: 4\n",
     "s.yaml:6:15: error: ", "'prompt_len' = -5 is out of range", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET
     "workload:\n  prompt_len: 100000\n  decode_len: 4\n",
     "s.yaml:6:15: error: ", "prompt_len + decode_len = 100004 exceeds the context", NULL},
    {"name: t\n" BASE_MODEL "protocol: {name: aby3, frac_bits: 64}\n" BASE_NET BASE_WORK,
     "s.yaml:3:35: error: ", "frac_bits", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: {latency_ms: -1, bandwidth_mbps: 10}\n" BASE_WORK,
     "s.yaml:4:23: error: ", "'latency_ms' = -1 is out of range", NULL},
    /* missing required keys */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET,
     "s.yaml:1:1: error: ", "missing required key 'workload'", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload:\n  prompt_len: 16\n",
     "s.yaml:6:3: error: ", "missing required key 'decode_len' in 'workload'", NULL},
    {"name: t\nmodel: {layers: 2}\n" BASE_PROTO BASE_NET BASE_WORK,
     "s.yaml:2:8: error: ", "missing required key 'dim' in 'model'", "hidden size"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: {latency_ms: 1}\n" BASE_WORK,
     "s.yaml:4:10: error: ", "missing required key 'bandwidth_mbps' in 'network'", NULL},
    /* unknown names, with did-you-mean */
    {"name: t\nmodel: stories260\n" BASE_PROTO BASE_NET BASE_WORK,
     "s.yaml:2:8: error: ", "unknown model 'stories260'", "did you mean 'stories260K'?"},
    {"name: t\n" BASE_MODEL "protocol: aby\n" BASE_NET BASE_WORK,
     "s.yaml:3:11: error: ", "unknown protocol 'aby'", "did you mean 'aby3'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: wna\n" BASE_WORK,
     "s.yaml:4:10: error: ", "unknown network 'wna'", "did you mean 'wan'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "policies: [full, streamingl]\n",
     "s.yaml:8:18: error: ", "unknown policy 'streamingl'", "did you mean 'streamingllm'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "sweep: zap\n",
     "s.yaml:8:8: error: ", "unknown 'sweep' value 'zap'", "did you mean 'zip'?"},
    /* a policy parameter the policy does not know (reported by the policy module) */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK
     "policies: [{name: h2o, bogus_key: 0.1}]\n",
     "s.yaml:8:24: error: ", "bogus_key", NULL},
    /* bad YAML: libyaml's problem mark (the second ':' on line 2) */
    {"name: t\nmodel: a: b\n", "s.yaml:2:9: error: ", "mapping values are not allowed", NULL},
    /* duplicate keys */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "model: llama-2-7b\n",
     "s.yaml:8:1: error: ", "duplicate key 'model'", "first defined at line 2:1"},
    /* empty sweep */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET "workload:\n  prompt_len: []\n  decode_len: 4\n",
     "s.yaml:6:15: error: ", "empty list", NULL},
    /* zip with lists of different lengths: the error points at the mismatched one */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET
     "workload:\n  prompt_len: [8, 16]\n  decode_len: 4\nsweep: zip\nseed: [1, 2, 3]\n",
     "s.yaml:9:7: error: ", "this list gives 3 values but the list at 6:15 gives 2", NULL},
    /* structure */
    {"name: t\n" BASE_MODEL BASE_PROTO "network:\n  latency_ms: 1\n  bandwidth_mbps: 1000\n  "
     "links: {0->5: {latency_ms: 3}}\n" BASE_WORK,
     "s.yaml:7:11: error: ", "bad link name '0->5'", NULL},
    {"name: t\nmodel: llama-2-7b\n" BASE_PROTO BASE_NET BASE_WORK
     "trace: {source: record, text: s.yaml}\n",
     "s.yaml:8:17: error: ", "trace source 'record' needs model weights", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK
     "trace: {source: npy, path: no/such/dir}\n",
     "s.yaml:8:28: error: ", "no such file or folder 'no/such/dir'", NULL},
    {"- a\n- b\n", "s.yaml:1:1: error: ", "must be a mapping of keys, not a list", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 20ms/fast\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad bandwidth 'fast'", NULL},
    /* bandwidth units: bytes and bare numbers refused with a hint */
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 50ms/1GBps\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad bandwidth '1GBps'", "a byte unit"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 50ms/1MBps\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad bandwidth '1MBps'", "write bits, e.g. 8Gbit/s"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 50ms/1gbps\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad bandwidth '1gbps'", "a byte unit"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 50ms/1000\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad bandwidth '1000'", "needs a unit"},
    {"name: t\n" BASE_MODEL BASE_PROTO "network: 50ms/1Gbit/s/100\n" BASE_WORK,
     "s.yaml:4:10: error: ", "bad burst '100'", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "machine: no-such-box\n",
     "s.yaml:8:10: error: ", "unknown machine profile 'no-such-box'", NULL},
    /* what the run will need, checked at load time */
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "policies: [h2o]\n",
     "s.yaml:8:12: error: ", "policy 'h2o' reads attention or keys and needs a trace",
     "trace: {source: synth}"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "policies: {name: h2o}\n",
     "s.yaml:8:18: error: ", "policy 'h2o' reads attention or keys and needs a trace", NULL},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK
     "trace: {source: synth, params: {sinks: 4}}\n",
     "s.yaml:8:33: error: ", "unknown synthetic trace parameter 'sinks'", "did you mean 'sink'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK
     "trace: {source: synth, params: {drift: 2}}\n",
     "s.yaml:8:33: error: ", "'drift' = 2 is out of range", "between 0 and 1"},
    {"name: t\nmodel: {layers: 1, dim: 4, heads: 4, ffn_dim: 8, vocab: 16, max_context: 64,\n"
     "  positional: learned}\n" BASE_PROTO BASE_NET BASE_WORK "trace: {source: synth}\n",
     "s.yaml:9:17: error: ", "a synthetic trace needs head_dim >= 2", NULL},
    /* cases */
    {"name: t\n" BASE_PROTO BASE_NET BASE_WORK "cases:\n  - model: gpt2\n  - sweep: zip\n",
     "s.yaml:9:5: error: ", "'sweep' cannot be set per case", NULL},
    {"name: t\n" BASE_PROTO BASE_NET BASE_WORK "cases:\n  - model: gpt2\n  - seed: 3\n",
     "s.yaml:9:5: error: ", "missing required key 'model'", NULL},
    {"name: t\n" BASE_PROTO BASE_NET BASE_WORK "cases:\n  - {modle: gpt2}\n",
     "s.yaml:8:6: error: ", "unknown key 'modle' in 'cases'", "did you mean 'model'?"},
    {"name: t\n" BASE_MODEL BASE_PROTO BASE_NET BASE_WORK "cases: []\n",
     "s.yaml:8:8: error: ", "empty list", NULL},
};
#define N_BAD (sizeof bad_cases / sizeof *bad_cases)

START_TEST(test_bad_input)
{
    const bad_case *b = &bad_cases[_i];
    scenario s;
    errbuf e = {{0}};
    int rc = load(b->text, &s, &e);
    ck_assert_msg(rc == MS_ERR_INPUT, "case %d: rc %d, message: %s", _i, rc, e.msg);
    th_bad_msg("", b, e.msg, _i);
    ck_assert_msg(strstr(e.msg, "hint") || strstr(e.msg, "did you mean"), "case %d: no hint in: %s",
                  _i, e.msg);
    ck_assert_ptr_null(s.runs);
}
END_TEST

START_TEST(test_missing_file)
{
    scenario s;
    errbuf e;
    ck_assert_int_eq(scn_load("/nonexistent/dir/x.yaml", NULL, &s, &e), MS_ERR_IO);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/dir/x.yaml"));
}
END_TEST

/* ---- yamlx ------------------------------------------------------------------------------- */

START_TEST(test_yamlx_tree)
{
    const char *t = "a: &x {b: 1, c: [2, 3]}\nd: *x\ne: 'quoted'\nf:\n";
    yx_node *r;
    errbuf e;
    ck_assert_int_eq(yx_parse("y.yaml", t, strlen(t), &r, &e), MS_OK);
    const yx_node *d = yx_map_get(r, "d");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->kind, YX_MAP);
    ck_assert_str_eq(yx_map_get(d, "b")->str, "1");
    ck_assert_int_eq(yx_map_get(d, "c")->kind, YX_SEQ);
    ck_assert_uint_eq(yx_map_get(d, "c")->n, 2);
    ck_assert_int_eq(yx_map_get(r, "a")->line, 1);
    ck_assert_int_eq(yx_map_get(r, "a")->col, 4);
    ck_assert_int_eq(yx_map_get(r, "e")->quoted, 1);
    ck_assert(yx_is_null(yx_map_get(r, "f")));
    ck_assert_ptr_null(yx_map_get(r, "zz"));
    yx_free(r);

    const char *two = "a: 1\n---\nb: 2\n";
    ck_assert_int_eq(yx_parse("y.yaml", two, strlen(two), &r, &e), MS_ERR_INPUT);
    ck_assert_msg(!strncmp(e.msg, "y.yaml:2:1: error: ", 19), "%s", e.msg);
    const char *alias = "a: *nope\n";
    ck_assert_int_eq(yx_parse("y.yaml", alias, strlen(alias), &r, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "nope"));
    const char *dup = "a:\n  b: 1\n  b: 2\n";
    ck_assert_int_eq(yx_parse("y.yaml", dup, strlen(dup), &r, &e), MS_ERR_INPUT);
    ck_assert_msg(!strncmp(e.msg, "y.yaml:3:3: error: duplicate key 'b'", 36), "%s", e.msg);
    ck_assert_int_eq(yx_parse("y.yaml", "", 0, &r, &e), MS_OK);
    ck_assert_int_eq(r->kind, YX_MAP);
    ck_assert_uint_eq(r->n, 0);
    yx_free(r);
}
END_TEST

/* ---- sweep expansion --------------------------------------------------------------------- */

/* The first parameter h2o declares, with two distinct valid values (its default and a
 * neighbour), so these tests follow whatever parameters the policy module ships. */
static int h2o_param(char *key, size_t kcap, char *v1, char *v2, size_t vcap)
{
    const policy_ops *p = policy_find("h2o");
    size_t n;
    const policy_param *pp = p ? policy_params(p, &n) : NULL;
    double d;
    if (!pp || n == 0 || !pp[0].def || parse_double(pp[0].def, &d))
        return 0;
    long long i;
    snprintf(key, kcap, "%s", pp[0].key);
    snprintf(v1, vcap, "%s", pp[0].def);
    if (!parse_i64(pp[0].def, &i))
        snprintf(v2, vcap, "%lld", i + 1);
    else
        snprintf(v2, vcap, "%g", d / 2);
    return 1;
}

START_TEST(test_grid)
{
    char key[64], v1[64], v2[64], pol[256], text[1024];
    int have = h2o_param(key, sizeof key, v1, v2, sizeof v1);
    if (have)
        snprintf(pol, sizeof pol, "  - {name: h2o, %s: [%s, %s]}\n", key, v1, v2);
    else
        snprintf(pol, sizeof pol, "  - h2o\n");
    snprintf(text, sizeof text,
             "name: g\nmodel: [stories260K, llama-2-7b]\nprotocol: [semi2k, aby3]\n"
             "network: lan\nworkload: {prompt_len: [8, 16, 32], decode_len: 4}\n"
             "trace: {source: synth}\npolicies:\n  - full\n%soutput: g.db\n",
             pol);
    scenario s;
    errbuf e;
    int rc = load(text, &s, &e);
    ck_assert_msg(rc == MS_OK, "%s\n%s", e.msg, text);
    size_t np = have ? 3 : 2; /* policy points: full, h2o×(2 or 1) */
    ck_assert_uint_eq(s.n_runs, 2 * 2 * 3 * np);
    ck_assert_str_eq(s.name, "g");
    ck_assert_str_eq(s.db, "g.db");
    /* first key slowest, policies fastest */
    for (size_t i = 0; i < s.n_runs; i++) {
        const run_cfg *c = &s.runs[i];
        size_t pi = i % np, len = (i / np) % 3, pr = (i / np / 3) % 2, mo = i / np / 6;
        ck_assert_uint_eq(c->index, i);
        ck_assert_str_eq(c->scenario, "g");
        ck_assert_str_eq(c->model_ref, mo ? "llama-2-7b" : "stories260K");
        ck_assert_str_eq(c->proto.name, pr ? "aby3" : "semi2k");
        ck_assert_uint_eq(c->work.prompt_len, 8u << len);
        ck_assert_str_eq(c->policy.name, pi ? "h2o" : "full");
        if (have && pi) {
            double want, got;
            ck_assert_str_eq(c->policy.params[0].key, key);
            ck_assert_int_eq(parse_double(pi == 1 ? v1 : v2, &want), 0);
            ck_assert_int_eq(parse_double(c->policy.params[0].val, &got), 0);
            ck_assert_double_eq(got, want);
        }
        for (size_t j = 0; j < i; j++) /* every point is a different config */
            ck_assert_str_ne(c->hash, s.runs[j].hash);
    }
    scn_free(&s);
}
END_TEST

START_TEST(test_zip)
{
    const char *text = "sweep: zip\nmodel: stories260K\nprotocol: [semi2k, aby3, semi2k]\n"
                       "network: [lan, wan, wan]\n"
                       "workload: {prompt_len: [8, 16, 32], decode_len: 4, batch: 2}\n"
                       "policies: [full, h2o, streamingllm]\nseed: 7\n"
                       "trace: {source: synth}\n";
    scenario s;
    load_ok(text, &s, 3);
    static const char *const pr[] = {"semi2k", "aby3", "semi2k"},
                             *const net[] = {"lan", "wan", "wan"},
                             *const pol[] = {"full", "h2o", "streamingllm"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq(s.runs[i].proto.name, pr[i]);
        ck_assert_str_eq(s.runs[i].net_ref, net[i]);
        ck_assert_str_eq(s.runs[i].policy.name, pol[i]);
        ck_assert_uint_eq(s.runs[i].work.prompt_len, 8u << i);
        ck_assert_uint_eq(s.runs[i].work.batch, 2);
        ck_assert_uint_eq(s.runs[i].seed, 7);
        /* the 3PC protocol gets a 3-party network */
        ck_assert_int_eq(s.runs[i].net.n_parties, proto_find(pr[i])->n_parties);
    }
    ck_assert_str_eq(s.name, "s"); /* default: the file's name */
    scn_free(&s);

    /* one-element lists are fixed values, in zip as in grid */
    const char *one = "sweep: zip\nmodel: [stories260K]\nprotocol: semi2k\nnetwork: lan\n"
                      "workload: {prompt_len: [8, 16], decode_len: [1]}\n";
    load_ok(one, &s, 2);
    scn_free(&s);
}
END_TEST

START_TEST(test_cases)
{
    const char *text = "protocol: [semi2k, aby3]\nnetwork: lan\n"
                       "workload: {prompt_len: 8, decode_len: 2}\n"
                       "cases:\n"
                       "  - model: stories260K\n"
                       "  - model: llama-2-7b\n"
                       "    protocol: aby3\n"
                       "    workload: {prompt_len: [16, 32], decode_len: 2}\n";
    scenario s;
    load_ok(text, &s, 4);
    static const char *const mo[] = {"stories260K", "stories260K", "llama-2-7b", "llama-2-7b"},
                             *const pr[] = {"semi2k", "aby3", "aby3", "aby3"};
    static const uint32_t len[] = {8, 8, 16, 32};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(s.runs[i].index, i);
        ck_assert_str_eq(s.runs[i].model_ref, mo[i]);
        ck_assert_str_eq(s.runs[i].proto.name, pr[i]);
        ck_assert_uint_eq(s.runs[i].work.prompt_len, len[i]);
    }
    scn_free(&s);
}
END_TEST

/* ---- resolved values --------------------------------------------------------------------- */

static void assert_round_trip(const scenario *s);

START_TEST(test_defaults_and_overrides)
{
    const char *text = "model: {base: llama-2-7b, max_context: 8192, name: l7-8k}\n"
                       "protocol: {name: aby3, frac_bits: 16}\n"
                       "network:\n  latency_ms: 2\n  bandwidth_mbps: 1000\n"
                       "  links: {0-2: {latency_ms: 30}, 1->0: {bandwidth_gbps: 0.1}}\n"
                       "  dealer: {latency_us: 500, bandwidth_mbps: 100}\n"
                       "workload: {prompt_len: 6000, decode_len: 8}\n"
                       "trace: {source: synth, params: {window: 64, sink: 4}}\n"
                       "policies: [h2o]\n";
    scenario s;
    load_ok(text, &s, 1);
    const run_cfg *c = &s.runs[0];
    model_cfg base;
    errbuf e;
    ck_assert_int_eq(model_load("llama-2-7b", &base, &e), MS_OK);
    ck_assert_str_eq(c->model_ref, "inline");
    ck_assert_str_eq(c->model.name, "l7-8k");
    ck_assert_uint_eq(c->model.max_ctx, 8192);
    ck_assert_uint_eq(c->model.n_layers, base.n_layers);
    ck_assert_uint_eq(c->model.ffn_dim, base.ffn_dim);
    proto_cfg pd;
    ck_assert_int_eq(proto_cfg_default("aby3", &pd, &e), MS_OK);
    ck_assert_int_eq(c->proto.frac_bits, 16);
    ck_assert_int_eq(c->proto.exp_iters, pd.exp_iters);
    ck_assert_str_eq(c->net_ref, "custom");
    ck_assert_int_eq(c->net.n_parties, 3);
    ck_assert_uint_eq(c->net.link[0][1].latency_ns, 2000000);
    ck_assert_uint_eq(c->net.link[0][2].latency_ns, 30000000);
    ck_assert_uint_eq(c->net.link[2][0].latency_ns, 30000000);
    ck_assert_double_eq(c->net.link[1][0].bandwidth_bps, 1e8);
    ck_assert_double_eq(c->net.link[0][1].bandwidth_bps, 1e9);
    ck_assert_uint_eq(c->net.link[1][0].latency_ns, 2000000);
    ck_assert_uint_eq(c->net.dealer.latency_ns, 500000);
    ck_assert_double_eq(c->net.dealer.bandwidth_bps, 1e8);
    ck_assert_uint_eq(c->work.batch, 1);
    ck_assert_int_eq(c->work.prefill_in_mpc, 1);
    ck_assert_uint_eq(c->work.decode_stride, 1);
    ck_assert_str_eq(c->trace.source, "synth");
    ck_assert_uint_eq(c->trace.n_params, 2);
    ck_assert_str_eq(c->trace.params[0].key, "sink"); /* sorted */
    ck_assert_str_eq(c->trace.params[1].val, "64");
    ck_assert_int_eq(c->trace.params[1].line, 9);
    /* the policy's declared parameters, then the replay's, defaults filled in */
    size_t np, nr;
    const policy_param *pp = policy_params(policy_find("h2o"), &np);
    const policy_param *rp = policy_replay_params(&nr);
    ck_assert_uint_eq(c->policy.n_params, np + nr);
    for (size_t i = 0; i < np + nr; i++) {
        const policy_param *want = i < np ? &pp[i] : &rp[i - np];
        ck_assert_str_eq(c->policy.params[i].key, want->key);
        /* the replay's keys take the policy's own default (metric_stride 16 for h2o) */
        const char *def = i < np ? want->def : policy_replay_default(policy_find("h2o"), want);
        double a, b;
        if (!parse_double(def, &a)) {
            ck_assert_int_eq(parse_double(c->policy.params[i].val, &b), 0);
            ck_assert_double_eq(a, b);
        }
    }
    ck_assert_uint_eq(c->seed, 1);
    ck_assert_int_eq(c->overlap, 0);
    ck_assert_ptr_nonnull(strstr(c->yaml, "max_context: 8192\n"));
    scn_free(&s);

    /* the short form of a uniform network */
    const char *short_net = "model: stories260K\nprotocol: aby3\nnetwork: 20ms/300Mbps\n"
                            "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(load(short_net, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(s.runs[0].net_ref, "custom");
    ck_assert_uint_eq(s.runs[0].net.link[2][1].latency_ns, 20000000);
    ck_assert_double_eq(s.runs[0].net.link[0][2].bandwidth_bps, 300e6);
    ck_assert_uint_eq(s.runs[0].net.link[0][2].burst_bytes, 0);
    ck_assert_ptr_null(strstr(s.runs[0].yaml, "burst")); /* no bucket: dumped as before */
    assert_round_trip(&s);
    scn_free(&s);

    /* token-bucket links: for all links, one link overridden, the short form */
    const char *bucket = "model: stories260K\nprotocol: aby3\n"
                         "network:\n  latency_ms: 1\n  bandwidth_mbps: 20\n  burst_bytes: 3100\n"
                         "  links: {2->1: {burst_bytes: 0}, 0-1: {burst_bytes: 12500}}\n"
                         "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(load(bucket, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(s.runs[0].net.link[0][2].burst_bytes, 3100);
    ck_assert_uint_eq(s.runs[0].net.dealer.burst_bytes, 3100);
    ck_assert_uint_eq(s.runs[0].net.link[2][1].burst_bytes, 0);
    ck_assert_uint_eq(s.runs[0].net.link[1][0].burst_bytes, 12500);
    ck_assert_uint_eq(s.runs[0].net.link[0][1].burst_bytes, 12500);
    ck_assert_uint_eq(s.runs[0].net.link[0][1].latency_ns, 1000000);
    assert_round_trip(&s);
    scn_free(&s);
    const char *bucket_short = "model: stories260K\nprotocol: semi2k\nnetwork: 1ms/20Mbps/3100\n"
                               "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(load(bucket_short, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(s.runs[0].net.link[1][0].burst_bytes, 3100);
    ck_assert_uint_eq(s.runs[0].net.wire.mtu, 0); /* wire framing: off by default */
    assert_round_trip(&s);
    scn_free(&s);

    /* a named model, and a base with no change, keep their name as the reference */
    const char *named = "model: {base: llama-2-7b}\nprotocol: semi2k\nnetwork: {preset: wan}\n"
                        "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(load(named, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(s.runs[0].model_ref, "llama-2-7b");
    ck_assert_str_eq(s.runs[0].net_ref, "wan");
    ck_assert_uint_eq(s.runs[0].work.decode_len, 0);
    scn_free(&s);
}
END_TEST

/* The network's wire framing: 'tcp' for Ethernet/IPv4/TCP, its fields overridden, 'none'; the
 * network reference a framing leaves (NULL: not checked); round: the run's text loads again to
 * the same run. */
static const struct wire_case {
    const char *network;
    uint32_t mtu, l3l4, l2, ack_every, msg;
    const char *ref;
    int round;
} wire_cases[] = {
    {"{latency_ms: 1, bandwidth_mbps: 20, wire: tcp}", 1500, 52, 14, 2, 0, NULL, 1},
    {"{preset: wan, wire: {mtu: 9000, msg_bytes: 32, ack_every: 0}}", 9000, 52, 14, 0, 32, "custom",
     1},
    {"{preset: lan, wire: none}", 0, 0, 0, 0, 0, "lan", 0},
};

START_TEST(test_wire_framing)
{
    const struct wire_case *w = &wire_cases[_i];
    char text[512];
    snprintf(text, sizeof text,
             "model: stories260K\nprotocol: semi2k\nnetwork: %s\n"
             "workload: {prompt_len: 8, decode_len: 0}\n",
             w->network);
    scenario s;
    load_ok(text, &s, -1);
    const net_wire *nw = &s.runs[0].net.wire;
    ck_assert_uint_eq(nw->mtu, w->mtu);
    ck_assert_uint_eq(nw->l3l4_bytes, w->l3l4);
    ck_assert_uint_eq(nw->l2_bytes, w->l2);
    ck_assert_uint_eq(nw->ack_every, w->ack_every);
    ck_assert_uint_eq(nw->msg_bytes, w->msg);
    ck_assert_uint_eq(nw->tls_record, 0); /* TLS only where asked for (check_tls) */
    if (w->ref)
        ck_assert_str_eq(s.runs[0].net_ref, w->ref);
    if (w->round)
        assert_round_trip(&s);
    scn_free(&s);
}
END_TEST

START_TEST(test_trace_paths)
{
    const char *dir = td.dir;
    char text[1024];
    const char *path = th_file(&td, "story.txt", "Once upon a time there was a tiny model.\n");
    snprintf(text, sizeof text,
             "model: stories260K\nprotocol: semi2k\nnetwork: lan\n"
             "workload: {prompt_len: 8, decode_len: 4}\n"
             "trace: {source: record, text: story.txt}\n");
    char scn_path[600];
    snprintf(scn_path, sizeof scn_path, "%s/s.yaml", dir);
    scenario s;
    errbuf e;
    ck_assert_msg(scn_load(scn_path, text, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(s.runs[0].trace.source, "record");
    ck_assert_str_eq(s.runs[0].trace.path, path); /* next to the scenario file */
    scn_free(&s);
}
END_TEST

/* A trace on disk shorter than prompt + decode, and a text that gives fewer tokens: refused at
 * load time at the path's line:col, and `mpcsim run` writes no database. */
START_TEST(test_trace_too_short)
{
    const char *dir = td.dir;
    char path[600], text[1024], cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "trace synth --model stories260K --tokens 12 -o %s/tr", dir);
    ck_assert_int_eq(th_cli_capture(cmd, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/story.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("Once upon a time.\n", f);
    fclose(f);
    char scn_path[600];
    snprintf(scn_path, sizeof scn_path, "%s/s.yaml", dir);
    static const struct {
        const char *trace, *where, *gist;
    } cases[] = {
        {"trace: {source: npy, path: tr}\n", "s.yaml:4:28: error: ",
         "trace 'tr' gives 12 positions, and the run needs prompt_len + decode_len = 16 + 4"},
        {"trace: {source: record, text: story.txt}\n",
         "s.yaml:4:31: error: ", "text 'story.txt' (model 'stories260K') gives"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text,
                 "model: stories260K\nprotocol: semi2k\nnetwork: lan\n%s"
                 "workload: {prompt_len: 16, decode_len: 4}\npolicies: [h2o]\n",
                 cases[i].trace);
        scenario s;
        errbuf e;
        ck_assert_int_eq(scn_load(scn_path, text, &s, &e), MS_ERR_INPUT);
        ck_assert_msg(strstr(e.msg, cases[i].where) && strstr(e.msg, cases[i].gist), "case %zu: %s",
                      i, e.msg);
        /* the same through the CLI: exit 2, no database */
        f = fopen(scn_path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "run %s -o %s/r.db -q", scn_path, dir);
        ck_assert_int_eq(th_cli_capture(cmd, out, sizeof out), 2);
        ck_assert_msg(strstr(out, cases[i].gist), "case %zu: %s", i, out);
        snprintf(path, sizeof path, "%s/r.db", dir);
        ck_assert_msg(access(path, F_OK) != 0, "case %zu: a database was written", i);
    }
    snprintf(text, sizeof text,
             "model: stories260K\nprotocol: semi2k\nnetwork: lan\n"
             "trace: {source: npy, path: tr}\nworkload: {prompt_len: 8, decode_len: 4}\n"
             "policies: [h2o]\n");
    scenario s;
    errbuf e;
    ck_assert_msg(scn_load(scn_path, text, &s, &e) == MS_OK, "%s", e.msg); /* 12 = 8 + 4 */
    scn_free(&s);
}
END_TEST

/* ---- model files and inline models resolve alike ----------------------------------------- */

/* Minimal descriptions per family: each form must fill the family's activation, norm,
 * positional and tied_embeddings, and derive kv_heads and head_dim, the same way. */
static const char *const model_bodies[] = {
    "family: llama\nlayers: 2\ndim: 64\nheads: 8\nffn_dim: 172\nvocab: 512\n"
    "max_context: 256\n",
    "family: gpt2\nlayers: 2\ndim: 96\nheads: 4\nffn_dim: 384\nvocab: 1000\n"
    "max_context: 128\n",
    "family: llama\nlayers: 3\ndim: 64\nheads: 8\nkv_heads: 2\nhead_dim: 16\n"
    "ffn_dim: 100\nvocab: 64\nmax_context: 64\nactivation: gelu\ntied_embeddings: true\n",
};

START_TEST(test_model_file_vs_inline)
{
    const char *path = testdir_path(&td, "m.yaml");
    char text[2048];
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "format: mpcsim-model 1\nname: tiny\n%s", model_bodies[_i]);
    fclose(f);
    model_cfg file;
    errbuf e;
    int rc = model_load(path, &file, &e);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    /* the same keys inline in a scenario, indented under model: */
    size_t o = (size_t)snprintf(text, sizeof text, "model:\n  name: tiny\n");
    for (const char *l = model_bodies[_i]; *l;) {
        size_t n = strcspn(l, "\n");
        o += (size_t)snprintf(text + o, sizeof text - o, "  %.*s\n", (int)n, l);
        l += n + (l[n] == '\n');
    }
    snprintf(text + o, sizeof text - o,
             "protocol: semi2k\nnetwork: lan\n"
             "workload: {prompt_len: 8, decode_len: 4}\n");
    scenario s;
    ck_assert_msg(scn_load("s.yaml", text, &s, &e) == MS_OK, "%s", e.msg);
    const model_cfg *in = &s.runs[0].model;
    const ys_schema *ms = model_schema();
    for (size_t i = 0; i < ms->n; i++)
        ck_assert_msg(ys_field_equal(&ms->field[i], &file, in),
                      "body %d: '%s' differs between the model file and the inline model", _i,
                      ms->field[i].key);
    ck_assert_int_eq(memcmp(&file, in, sizeof file), 0); /* nothing outside the schema either */
    /* what each family resolves to */
    int gpt2 = file.family == FAM_GPT2;
    if (_i < 2) {
        ck_assert_int_eq(file.act, gpt2 ? ACT_GELU : ACT_SWIGLU);
        ck_assert_int_eq(file.norm, gpt2 ? NORM_LAYER : NORM_RMS);
        ck_assert_int_eq(file.pos, gpt2 ? POS_LEARNED : POS_ROPE);
        ck_assert_int_eq(file.tied_embeddings, gpt2);
        ck_assert_uint_eq(file.n_kv_heads, file.n_heads);
        ck_assert_uint_eq(file.head_dim, file.dim / file.n_heads);
    } else { /* given keys win over the family's and the derived ones */
        ck_assert_int_eq(file.act, ACT_GELU);
        ck_assert_int_eq(file.tied_embeddings, 1);
        ck_assert_uint_eq(file.n_kv_heads, 2);
        ck_assert_uint_eq(file.head_dim, 16);
    }
    scn_free(&s);
}
END_TEST

/* A model file's mistakes at their line:col (the reader shares the scenarios' messages). */
static const struct {
    const char *body, *where, *gist;
} model_bad[] = {
    {"name: t\nfamily: llama\nlayers: 2\ndim: 64\nheads: 8\nffn_dim: 8\nvocab: 8\n"
     "max_contxt: 8\n",
     ":8:1: error: ",
     "unknown key 'max_contxt' in 'model' (did you mean "
     "'max_context'?)"},
    {"name: t\nlayers: 2\nlayers: 3\n", ":3:1: error: ", "duplicate key 'layers'"},
    {"name: t\nfamily: lama\n", ":2:9: error: ",
     "unknown 'family' value 'lama' (did you mean "
     "'llama'?)"},
    {"name: t\nlayers: 2\n", ":1:1: error: ", "missing required key 'dim' in 'model'"},
    {"format: mpcsim-model 2\nname: t\n", ":1:9: error: ", "unsupported format 'mpcsim-model 2'"},
    {"name: t\nlayers: 2\ndim: 63\nheads: 7\nffn_dim: 8\nvocab: 8\nmax_context: 8\n",
     ":1:1: error: ", "RoPE needs an even head_dim"},
    {"name: t\nlayers: [2]\n", ":2:9: error: ", "'layers' must be an integer, not a list"},
};

START_TEST(test_model_file_errors)
{
    const char *path = th_file(&td, "m.yaml", model_bad[_i].body);
    char want[700];
    model_cfg m;
    errbuf e;
    int rc = model_load(path, &m, &e);
    ck_assert_int_eq(rc, MS_ERR_INPUT);
    snprintf(want, sizeof want, "%s%s", path, model_bad[_i].where);
    ck_assert_msg(!strncmp(e.msg, want, strlen(want)), "'%s' does not start with '%s'", e.msg,
                  want);
    ck_assert_msg(strstr(e.msg, model_bad[_i].gist), "'%s' lacks '%s'", e.msg, model_bad[_i].gist);
}
END_TEST

/* ---- hash and canonical YAML -------------------------------------------------------------- */

static uint64_t fnv1a_ref(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

START_TEST(test_hash)
{
    const char *a = "model: stories260K\nprotocol: {name: aby3, frac_bits: 16}\n"
                    "network: {latency_ms: 1, bandwidth_mbps: 1000}\n"
                    "workload: {prompt_len: 8, decode_len: 2}\n";
    const char *b = "name: other\nseed: 1\nworkload:\n  decode_len: 2\n  prompt_len: 8\n"
                    "  batch: 1\nnetwork: {bandwidth_gbps: 1, latency_us: 1000}\n"
                    "protocol: {frac_bits: 16, name: aby3}\nmodel: stories260K\n"
                    "policies: [{name: full}]\n";
    const char *c = "model: stories260K\nprotocol: {name: aby3, frac_bits: 16}\n"
                    "network: {latency_ms: 1, bandwidth_mbps: 1000}\n"
                    "workload: {prompt_len: 8, decode_len: 2}\nseed: 2\n";
    scenario sa, sb, sc;
    errbuf e;
    ck_assert_msg(load(a, &sa, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(load(b, &sb, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(load(c, &sc, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(sa.runs[0].yaml, sb.runs[0].yaml);
    ck_assert_str_eq(sa.runs[0].hash, sb.runs[0].hash);
    ck_assert_str_ne(sa.runs[0].hash, sc.runs[0].hash);
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)fnv1a_ref(sa.runs[0].yaml));
    ck_assert_str_eq(sa.runs[0].hash, want);
    ck_assert_uint_eq(strlen(sa.runs[0].hash), 16);
    ck_assert_ptr_null(strstr(sa.runs[0].yaml, "name: other")); /* labels are not config */
    /* scn_resolve_yaml is a function of the config only */
    run_cfg copy = sa.runs[0];
    copy.yaml = NULL;
    ck_assert_int_eq(scn_resolve_yaml(&copy, &e), MS_OK);
    ck_assert_str_eq(copy.yaml, sa.runs[0].yaml);
    copy.work.decode_len = 3;
    ck_assert_int_eq(scn_resolve_yaml(&copy, &e), MS_OK);
    ck_assert_str_ne(copy.hash, sa.runs[0].hash);
    free(copy.yaml);
    scn_free(&sa);
    scn_free(&sb);
    scn_free(&sc);
}
END_TEST

/* Every field of a protocol configuration that a scenario sets, equal in a and b. */
static void assert_proto_eq(const proto_cfg *a, const proto_cfg *b)
{
#define FIELD(f, kind)                   \
    {                                    \
#f, offsetof(proto_cfg, f), kind \
    }
    static const struct {
        const char *name;
        size_t off;
        char kind;
    } fields[] = {
        FIELD(name, 's'),         FIELD(ring_bits, 'i'),    FIELD(frac_bits, 'i'),
        FIELD(exp_iters, 'i'),    FIELD(recip_iters, 'i'),  FIELD(rsqrt_iters, 'i'),
        FIELD(softmax_clip, 'd'), FIELD(beaver_cache, 'i'), FIELD(trunc_local, 'i'),
        FIELD(approx, 's'),       FIELD(msb, 's'),          FIELD(topk, 's'),
        FIELD(compat, 's'),       FIELD(gather, 's'),
    };
#undef FIELD
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const char *x = (const char *)a + fields[i].off, *y = (const char *)b + fields[i].off;
        if (fields[i].kind == 's')
            ck_assert_msg(!strcmp(x, y), "%s: '%s' vs '%s'", fields[i].name, x, y);
        else if (fields[i].kind == 'i')
            ck_assert_msg(*(const int *)x == *(const int *)y, "%s: %d vs %d", fields[i].name,
                          *(const int *)x, *(const int *)y);
        else
            ck_assert_msg(*(const double *)x == *(const double *)y, "%s: %g vs %g", fields[i].name,
                          *(const double *)x, *(const double *)y);
    }
}

static void assert_net_eq(const net_cfg *a, const net_cfg *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_int_eq(a->n_parties, b->n_parties);
    for (int i = 0; i < a->n_parties; i++)
        for (int j = 0; j < a->n_parties; j++) {
            if (i == j)
                continue;
            ck_assert_uint_eq(a->link[i][j].latency_ns, b->link[i][j].latency_ns);
            ck_assert_double_eq(a->link[i][j].bandwidth_bps, b->link[i][j].bandwidth_bps);
            ck_assert_uint_eq(a->link[i][j].burst_bytes, b->link[i][j].burst_bytes);
        }
    ck_assert_uint_eq(a->dealer.latency_ns, b->dealer.latency_ns);
    ck_assert_uint_eq(a->dealer.burst_bytes, b->dealer.burst_bytes);
    ck_assert_double_eq(a->dealer.bandwidth_bps, b->dealer.bandwidth_bps);
    ck_assert_mem_eq(&a->wire, &b->wire, sizeof a->wire);
}

/* Each resolved run, loaded as a scenario, gives the same run. */
static void assert_round_trip(const scenario *s)
{
    for (size_t i = 0; i < s->n_runs; i++) {
        scenario r;
        errbuf e;
        const run_cfg *c = &s->runs[i];
        ck_assert_msg(load(c->yaml, &r, &e) == MS_OK, "run %zu: %s\n%s", i, e.msg, c->yaml);
        ck_assert_uint_eq(r.n_runs, 1);
        const run_cfg *d = &r.runs[0];
        ck_assert_str_eq(d->yaml, c->yaml);
        ck_assert_str_eq(d->hash, c->hash);
        ck_assert_str_eq(d->model_ref, c->model_ref);
        ck_assert_str_eq(d->proto_ref, c->proto_ref);
        ck_assert_str_eq(d->net_ref, c->net_ref);
        assert_proto_eq(&d->proto, &c->proto);
        assert_net_eq(&d->net, &c->net);
        ck_assert_uint_eq(d->work.prompt_len, c->work.prompt_len);
        ck_assert_uint_eq(d->work.decode_len, c->work.decode_len);
        ck_assert_uint_eq(d->work.batch, c->work.batch);
        ck_assert_int_eq(d->work.prefill_in_mpc, c->work.prefill_in_mpc);
        ck_assert_uint_eq(d->work.decode_stride, c->work.decode_stride);
        ck_assert_str_eq(d->model.name, c->model.name);
        ck_assert_uint_eq(d->model.max_ctx, c->model.max_ctx);
        ck_assert_double_eq(d->machine.rate[WK_MAC], c->machine.rate[WK_MAC]);
        ck_assert_str_eq(d->trace.source, c->trace.source);
        ck_assert_str_eq(d->trace.path, c->trace.path);
        ck_assert_uint_eq(d->policy.n_params, c->policy.n_params);
        for (size_t k = 0; k < c->policy.n_params; k++) {
            ck_assert_str_eq(d->policy.params[k].key, c->policy.params[k].key);
            ck_assert_str_eq(d->policy.params[k].val, c->policy.params[k].val);
        }
        ck_assert_uint_eq(d->seed, c->seed);
        ck_assert_int_eq(d->overlap, c->overlap);
        scn_free(&r);
    }
}

START_TEST(test_round_trip)
{
    const char *text =
        "model: [stories260K, {base: llama-2-7b, max_context: 8192},\n"
        "        {family: gpt2, layers: 2, dim: 64, heads: 4, ffn_dim: 256, vocab: 100,\n"
        "         max_context: 128}]\n"
        "protocol: [semi2k, {name: aby3, frac_bits: 14, beaver_cache: false}]\n"
        "network: [lan, {preset: wan, links: {0->1: {latency_ms: 80}}},\n"
        "          {latency_ms: 0.25, bandwidth_mbps: 333.3, dealer: {bandwidth_mbps: 50}}]\n"
        "machine: {name: box, mac_per_s: 3.5e9, threads: 2}\n"
        "workload: {prompt_len: 64, decode_len: 4, batch: 2, prefill_in_mpc: false,\n"
        "           decode_stride: 2}\n"
        "trace: {source: synth, params: {sink: 4, heavy: 0.10, noise: 2}}\n"
        "policies: [full, streamingllm, h2o]\n"
        "seed: 12345678901\noverlap: true\n";
    scenario s;
    load_ok(text, &s, 3 * 2 * 3 * 3);
    ck_assert_str_eq(s.runs[0].machine.name, "box");
    ck_assert_double_eq(s.runs[0].machine.rate[WK_MAC], 3.5e9);
    ck_assert_int_eq(s.runs[0].machine.threads, 2);
    assert_round_trip(&s);
    scn_free(&s);
}
END_TEST

START_TEST(test_topk_axis)
{
    /* the protocol key topk is a sweep axis; its runs differ in their resolved config (the
     * default written nowhere, so older runs keep their hash) and round-trip */
    const char *text = "model: stories260K\nprotocol: {name: aby3, topk: [network, quickselect]}\n"
                       "network: lan\nworkload: {prompt_len: 8, decode_len: 1}\npolicies: [full]\n";
    scenario s;
    load_ok(text, &s, 2);
    ck_assert_str_eq(s.runs[0].proto.topk, "network");
    ck_assert_str_eq(s.runs[1].proto.topk, "quickselect");
    ck_assert_str_ne(s.runs[0].hash, s.runs[1].hash);
    ck_assert_ptr_null(strstr(s.runs[0].yaml, "topk"));
    ck_assert_ptr_nonnull(strstr(s.runs[1].yaml, "topk: quickselect"));
    assert_round_trip(&s);
    scn_free(&s);
}
END_TEST

START_TEST(test_gather_compat_axes)
{
    /* gather and compat change the step's ops and costs: runs differing only in one of them
     * are different runs (different canonical YAML and hash, so the results database stores
     * both), each round-tripping; the defaults (rows, native) stay unwritten */
    const char *text = "model: stories260K\n"
                       "protocol: {name: aby3, gather: [rows, scores], compat: [native, spu]}\n"
                       "network: lan\nworkload: {prompt_len: 8, decode_len: 1}\npolicies: [full]\n";
    scenario s;
    load_ok(text, &s, 4);
    for (size_t i = 0; i < s.n_runs; i++)
        for (size_t j = i + 1; j < s.n_runs; j++) {
            ck_assert_str_ne(s.runs[i].yaml, s.runs[j].yaml);
            ck_assert_str_ne(s.runs[i].hash, s.runs[j].hash);
        }
    for (size_t i = 0; i < s.n_runs; i++) {
        const proto_cfg *p = &s.runs[i].proto;
        const char *y = s.runs[i].yaml;
        if (!strcmp(p->gather, "rows"))
            ck_assert_ptr_null(strstr(y, "gather"));
        else
            ck_assert_ptr_nonnull(strstr(y, "gather: scores"));
        if (!strcmp(p->compat, "native"))
            ck_assert_ptr_null(strstr(y, "compat"));
        else
            ck_assert_ptr_nonnull(strstr(y, "compat: spu"));
    }
    assert_round_trip(&s);
    scn_free(&s);
}
END_TEST

/* ---- shipped scenarios and the CLI ------------------------------------------------------- */

START_TEST(test_shipped_scenarios)
{
    static const char *const files[] = {
        "scenarios/quickstart.yaml", "scenarios/wan-vs-lan.yaml", "scenarios/eviction-7b-32k.yaml",
        "scenarios/gqa-llama3.yaml", "scenarios/eviction-study.yaml"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = th_data_path(files[i]);
        scenario s;
        errbuf e;
        ck_assert_msg(scn_load(path, NULL, &s, &e) == MS_OK, "%s", e.msg);
        ck_assert_uint_gt(s.n_runs, 0);
        ck_assert_str_ne(s.db, "");
        assert_round_trip(&s);
        scn_free(&s);
    }
}
END_TEST

START_TEST(test_cli_list)
{
    static char out[65536];
    ck_assert_int_eq(th_cli_capture("list networks", out, sizeof out), 0);
    size_t n;
    const char *const *names = net_preset_names(&n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strstr(out, names[i]), "no '%s' in: %s", names[i], out);
    /* each command line, its exit status and what its output holds */
    static const struct {
        const char *args;
        int status;
        const char *want[2];
    } lists[] = {
        {"list policies", 0, {"h2o", "streamingllm"}},
        {"list models", 0, {"stories260K"}},
        {"list protocols", 0, {"semi2k", "aby3"}},
        {"list protocols --costs -n 16", 0, {"semi2k"}},
        {"list --help", 0, {"usage: mpcsim list"}},
        {"list modles", 2, {"did you mean 'models'?"}},
    };
    for (int i = 0; i < TH_N(lists); i++) {
        ck_assert_int_eq(th_cli_capture(lists[i].args, out, sizeof out), lists[i].status);
        for (int w = 0; w < 2 && lists[i].want[w]; w++)
            ck_assert_msg(strstr(out, lists[i].want[w]), "%s: no '%s' in: %s", lists[i].args,
                          lists[i].want[w], out);
    }
    /* the key tables of the input files, printed from the readers' schemas, in 80 columns */
    ck_assert_int_eq(th_cli_capture("list keys", out, sizeof out), 0);
    static const char *const keys[] = {"keys of 'model'", "kv_heads",   "keys of 'machine profile'",
                                       "mac_per_s",       "heavy_frac", "keys of 'sharing'",
                                       "capacity_tokens"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        ck_assert_msg(strstr(out, keys[i]), "no '%s' in: %s", keys[i], out);
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0))
        ck_assert_msg(strcspn(l, "\n") <= 80, "line over 80 columns: %.100s", l);
    ck_assert_int_eq(th_cli_capture("list keys synth", out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "ffn_sparsity"));
    ck_assert_ptr_null(strstr(out, "kv_heads"));
    ck_assert_int_eq(th_cli_capture("list keys modl", out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "did you mean 'model'?"));
    static const char *const usage[] = {"list", "list models --costs",
                                        "list protocols --costs -n 0"};
    for (int i = 0; i < TH_N(usage); i++)
        ck_assert_msg(th_cli_capture(usage[i], out, sizeof out) == 2, "%s: %s", usage[i], out);
}
END_TEST

/* The policies of a sweep are measured on the same decode steps: every run's metric_stride is
 * the one default unless its entry sets another. */
START_TEST(test_same_metric_steps)
{
    scenario s;
    load_ok("model: stories260K\nprotocol: semi2k\nnetwork: lan\ntrace: {source: synth}\n"
            "workload: {prompt_len: 32, decode_len: 40}\n"
            "policies: [full, streamingllm, h2o, quest, mpcache, {name: tova, metric_stride: 4}]\n",
            &s, 6);
    for (size_t r = 0; r < s.n_runs; r++) {
        const run_cfg *c = &s.runs[r];
        const char *v = NULL;
        for (size_t i = 0; i < c->policy.n_params; i++)
            if (!strcmp(c->policy.params[i].key, "metric_stride"))
                v = c->policy.params[i].val;
        ck_assert_ptr_nonnull(v);
        ck_assert_msg(!strcmp(v, strcmp(c->policy.name, "tova") ? "16" : "4"), "%s: %s",
                      c->policy.name, v);
    }
    scn_free(&s);
}
END_TEST

Suite *scn_suite(void)
{
    Suite *s = suite_create("scn");
    TCase *t = th_case(s, "errors", 0);
    TH_LOOPS(t, (int)N_BAD, test_bad_input);
    TH_TESTS(t, test_missing_file, test_yamlx_tree);
    t = th_case(s, "sweep", 0);
    TESTDIR_USE(t);
    TH_TESTS(t, test_grid, test_zip, test_cases, test_defaults_and_overrides,
             test_same_metric_steps);
    TH_LOOPS(t, TH_N(wire_cases), test_wire_framing);
    TH_TESTS(t, test_trace_paths, test_trace_too_short);
    TH_LOOPS(t, (int)(sizeof model_bodies / sizeof *model_bodies), test_model_file_vs_inline);
    TH_LOOPS(t, (int)(sizeof model_bad / sizeof *model_bad), test_model_file_errors);
    t = th_case(s, "canonical", 30);
    TH_TESTS(t, test_hash, test_round_trip, test_topk_axis, test_gather_compat_axes,
             test_shipped_scenarios, test_cli_list);
    return s;
}

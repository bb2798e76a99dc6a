/* check_plugin.c — out-of-tree policy plug-ins (sim/policy/plugin.h, include/mpcsim/
 * policy_plugin.h): the example scenarios/plugins/keynorm.c built here as POLICIES.md says, its
 * kept sets on a stories260K trace against the algorithm computed independently, a scenario run
 * with it (metrics, a nonzero policy cost, the selection ops), and the load errors: another ABI
 * version, no entry point, a taken name. */
#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stories.h"
#include "testdir.h"
#include "include/mpcsim/policy_plugin.h"
#include "protocols/program/op.h"
#include "sim/policy/plugin.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

TESTDIR("check_plugin")

/* The build command of POLICIES.md "Writing a policy" (test_install runs it as written). */
#define DOC_CC \
    "cc -std=c11 -fPIC -shared $(pkg-config --cflags mpcsim-plugin) keynorm.c -o keynorm.so"

static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* Compiles src into <test dir>/<so> as POLICIES.md's steps do (the public header alone). */
static const char *build_plugin(const char *src, const char *so)
{
    static char out[4096];
    char *path = th_plugin_build(&td, src, so);
    snprintf(out, sizeof out, "%s", path);
    free(path);
    return out;
}

/* A plug-in from source text written to the test folder. */
static const char *build_text(const char *name, const char *text)
{
    char c[64], so[64];
    snprintf(c, sizeof c, "%s.c", name);
    snprintf(so, sizeof so, "%s.so", name);
    char *src = strdup(th_file(&td, c, text));
    const char *r = build_plugin(src, so);
    free(src);
    return r;
}

/* ---- keynorm's kept sets --------------------------------------------------------------- */

#define KN_SINK 4
#define KN_KEEP 12

/* The kept set of one KV head at pos, by the algorithm's definition: [0, sink), then the keep
 * positions of largest squared key norm among [sink, pos) (float, as the plug-in keeps them;
 * ties: the earlier position), by selection over a plain array. */
static void want_keep(const float *norm, uint32_t pos, uint8_t *want)
{
    memset(want, 0, pos);
    if (pos <= KN_SINK + KN_KEEP) {
        memset(want, 1, pos);
        return;
    }
    memset(want, 1, KN_SINK);
    for (int n = 0; n < KN_KEEP; n++) {
        int best = -1;
        for (uint32_t j = KN_SINK; j < pos; j++)
            if (!want[j] && (best < 0 || norm[j] > norm[best]))
                best = (int)j;
        want[best] = 1;
    }
}

START_TEST(test_keynorm_kept)
{
    const char *so = build_plugin(th_data_path("scenarios/plugins/keynorm.c"), "keynorm.so");
    errbuf e;
    const policy_ops *p = NULL;
    ck_assert_msg(policy_plugin_load(so, &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(p->name, "keynorm");
    ck_assert_ptr_eq(policy_find("keynorm"), p);
    ck_assert_ptr_nonnull(policy_schema(p));
    const policy_ops *again = NULL;
    ck_assert_int_eq(policy_plugin_load(so, &again, &e), MS_OK);
    ck_assert_ptr_eq(again, p); /* loaded once */

    char dir[300];
    snprintf(dir, sizeof dir, "%s", tpath("tr"));
    ck_assert_int_eq(th_runl(NULL, tpath("rec.txt"), NULL, "trace", "record", "--model",
                             "stories260K", "--text",
                             th_data_path("tests/data/tinystories_sample.txt"), "--max-tokens",
                             "48", "-o", dir, (char *)NULL),
                     0);
    trace *t;
    ck_assert_msg(trace_open(dir, &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    const uint32_t P = 24, T = 48, L = sh->n_layers, Hkv = sh->n_kv_heads, d = sh->head_dim;
    ck_assert_uint_ge(sh->n_tokens, T);
    policy_env env = {L, sh->n_heads, Hkv,  d,    sh->dim, sh->ffn_dim, P,
                      T, NULL,        NULL, NULL, 1,       NULL};
    kv_param kv[2] = {fixture_kvp("sink", "4", 3, 5), fixture_kvp("keep", "12", 3, 14)};
    policy_args a = {.kv = kv, .n = 2, .path = "t.yaml"};
    ck_assert_msg(policy_check_params(p, kv, 2, "t.yaml", &e) == MS_OK, "%s", e.msg);
    void *st = NULL;
    ck_assert_msg(p->init(&env, &a, &st, &e) == MS_OK, "%s", e.msg);

    float *k = malloc((size_t)Hkv * d * sizeof *k);
    float *norm = calloc((size_t)L * Hkv * T, sizeof *norm);
    uint8_t *keep = malloc((size_t)Hkv * T), *want = malloc(T);
    size_t checked = 0, differs_from_prefix = 0;
    for (uint32_t pos = 0; pos < T; pos++) {
        if (pos == P && p->prefill)
            ck_assert_msg(p->prefill(st, &e) == MS_OK, "%s", e.msg);
        for (uint32_t l = 0; l < L; l++) {
            if (pos >= P) {
                ck_assert_msg(p->select(st, l, pos, NULL, keep, &e) == MS_OK, "%s", e.msg);
                for (uint32_t g = 0; g < Hkv; g++) {
                    want_keep(norm + ((size_t)l * Hkv + g) * T, pos, want);
                    for (uint32_t j = 0; j < pos; j++)
                        ck_assert_msg(keep[(size_t)g * pos + j] == want[j],
                                      "layer %u head %u pos %u: entry %u kept %d, expected %d", l,
                                      g, pos, j, keep[(size_t)g * pos + j], want[j]);
                    for (uint32_t j = KN_SINK; j < KN_SINK + KN_KEEP; j++)
                        differs_from_prefix += !want[j];
                    checked++;
                }
            }
            ck_assert_int_eq(p->needs(st, pos) & POLICY_NEED_K, POLICY_NEED_K);
            ck_assert_int_eq(trace_kv(t, l, pos, k, NULL), MS_OK);
            for (uint32_t g = 0; g < Hkv; g++) {
                double sq = 0;
                for (uint32_t i = 0; i < d; i++)
                    sq += (double)k[g * d + i] * k[g * d + i];
                norm[((size_t)l * Hkv + g) * T + pos] = (float)sq;
            }
            policy_obs o = {.layer = l, .pos = pos, .k = k};
            ck_assert_msg(p->observe(st, &o, &e) == MS_OK, "%s", e.msg);
        }
    }
    ck_assert_uint_eq(checked, (size_t)(T - P) * L * Hkv);
    ck_assert_uint_gt(differs_from_prefix, 0); /* the norms chose, not the positions */

    /* the decode ops: the norm of the step's key, the top-k of the candidates, the gather */
    op_program prg, *prog = &prg;
    op_program_init(prog);
    uint32_t kept[8] = {KN_SINK + KN_KEEP, KN_SINK + KN_KEEP, KN_SINK + KN_KEEP, KN_SINK + KN_KEEP};
    ck_assert_msg(p->emit_cost(st, PHASE_DECODE, 1, 40, kept, prog, &e) == MS_OK, "%s", e.msg);
    int topk = 0, gather = 0, square = 0;
    for (size_t i = 0; i < prog->n_ops; i++) {
        const op *o = &prog->ops[i];
        ck_assert_int_eq(o->cat, OPC_POLICY);
        ck_assert_int_eq(o->layer, 1);
        if (o->kind == OP_TOPK) {
            topk++;
            ck_assert_int_eq(o->iarg, KN_KEEP);
            ck_assert_uint_eq(o->n, 40 - KN_SINK);
            ck_assert_uint_eq(o->batch, Hkv);
        }
        gather += o->kind == OP_GATHER;
        square += o->kind == OP_SQUARE;
    }
    ck_assert_int_eq(topk, 1);
    ck_assert_int_eq(gather, 1);
    ck_assert_int_eq(square, 1);
    op_program_free(prog);

    p->fini(st);
    trace_close(t);
    free(k);
    free(norm);
    free(keep);
    free(want);
}
END_TEST

/* A scenario with the plug-in: runs, metrics written, a nonzero policy cost in the decode
 * phase; the same scenario with the path wrong fails at its file:line:col and writes nothing. */
START_TEST(test_keynorm_scenario)
{
    build_plugin(th_data_path("scenarios/plugins/keynorm.c"), "keynorm.so");
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "format: 1\n"
             "name: kn\n"
             "protocol: semi2k\n"
             "network: lan\n"
             "cases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: 32, decode_len: 16}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies:\n"
             "      - {plugin: keynorm.so, sink: 4, keep: 12, metric_stride: 1}\n",
             th_data_path("tests/data/tinystories_sample.txt"));
    char *scn = strdup(th_file(&td, "kn.yaml", yaml));
    char *db = strdup(tpath("kn.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("run.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(
        sqlite3_prepare_v2(h,
                           "SELECT r.policy, r.status, "
                           " (SELECT COUNT(*) FROM metrics m WHERE m.run_id = r.id AND "
                           "  m.name = 'attn_mass_recall' AND m.value > 0 AND m.value < 1), "
                           " (SELECT bytes_p0 FROM breakdown b WHERE b.run_id = r.id AND "
                           "  b.phase = 'decode' AND b.category = 'policy'), "
                           " (SELECT rounds FROM breakdown b WHERE b.run_id = r.id AND "
                           "  b.phase = 'decode' AND b.category = 'policy') FROM runs r",
                           -1, &q, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "keynorm");
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 1), "ok");
    ck_assert_int_eq(sqlite3_column_int(q, 2), 1);
    ck_assert_int_gt(sqlite3_column_int64(q, 3), 0);
    ck_assert_int_gt(sqlite3_column_int64(q, 4), 0);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(h);

    /* a path that is not there: the entry's location, exit 2, no database */
    char *bad = strdup(yaml);
    char *at = strstr(bad, "keynorm.so");
    memcpy(at, "keynorX", 7);
    char *scn2 = strdup(th_file(&td, "bad.yaml", bad));
    char *db2 = strdup(tpath("bad.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("bad.txt"), NULL, "run", scn2, "-o", db2, (char *)NULL),
                     2);
    const char *msg = th_text(tpath("bad.txt"));
    ck_assert_msg(strstr(msg, "bad.yaml:10:18: error:"), "%s", msg);
    ck_assert(!th_exists(db2));
    free(scn);
    free(db);
    free(bad);
    free(scn2);
    free(db2);
}
END_TEST

/* ---- load errors ------------------------------------------------------------------------ */

static const char *const wrong_abi =
    "#include <mpcsim/policy_plugin.h>\n"
    "static int in(const mpcsim_env *v, const mpcsim_args *a, void **s, mpcsim_err *e)\n"
    "{ return 0; }\n"
    "static int sel(void *s, uint32_t l, uint32_t p, const float *q, uint8_t *k, mpcsim_err *e)\n"
    "{ return 0; }\n"
    "static const mpcsim_policy pol = {.abi_major = MAJOR, .abi_minor = MINOR,\n"
    "    .name = NAME, .init = in, .select = sel};\n"
    "const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *api) { return &pol; }\n";

/* The wrong_abi source for one version and name. */
static const char *abi_source(int major, int minor, const char *name)
{
    static char buf[2048];
    snprintf(buf, sizeof buf, "#define MAJOR %d\n#define MINOR %d\n#define NAME \"%s\"\n%s", major,
             minor, name, wrong_abi);
    return buf;
}

START_TEST(test_abi_mismatch)
{
    errbuf e;
    const policy_ops *p = NULL;
    /* a newer major, then a newer minor: refused, naming the file and both versions */
    char want[64], host[64];
    snprintf(host, sizeof host, "provides %d.%d", MPCSIM_PLUGIN_ABI_MAJOR, MPCSIM_PLUGIN_ABI_MINOR);
    const int ver[2][2] = {{MPCSIM_PLUGIN_ABI_MAJOR + 1, 0},
                           {MPCSIM_PLUGIN_ABI_MAJOR, MPCSIM_PLUGIN_ABI_MINOR + 1}};
    for (int i = 0; i < 2; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "abi%d", i);
        const char *so = build_text(nm, abi_source(ver[i][0], ver[i][1], nm));
        ck_assert_int_eq(policy_plugin_load(so, &p, &e), MS_ERR_INPUT);
        ck_assert_msg(strstr(e.msg, so) == e.msg, "%s", e.msg);
        snprintf(want, sizeof want, "built against policy ABI %d.%d", ver[i][0], ver[i][1]);
        ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
        ck_assert_msg(strstr(e.msg, host), "%s", e.msg);
        ck_assert_ptr_null(policy_find(nm));
    }
    /* the same version loads; an older minor would too */
    const char *ok =
        build_text("abiok", abi_source(MPCSIM_PLUGIN_ABI_MAJOR, MPCSIM_PLUGIN_ABI_MINOR, "abi_ok"));
    ck_assert_msg(policy_plugin_load(ok, &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(p->name, "abi_ok");
    /* a built-in's name, and a second file with a loaded plug-in's name */
    const char *dup =
        build_text("dup", abi_source(MPCSIM_PLUGIN_ABI_MAJOR, MPCSIM_PLUGIN_ABI_MINOR, "h2o"));
    ck_assert_int_eq(policy_plugin_load(dup, &p, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "is a built-in policy's"), "%s", e.msg);
    const char *twin =
        build_text("twin", abi_source(MPCSIM_PLUGIN_ABI_MAJOR, MPCSIM_PLUGIN_ABI_MINOR, "abi_ok"));
    ck_assert_int_eq(policy_plugin_load(twin, &p, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "is taken by plug-in"), "%s", e.msg);

    /* through a scenario: file:line:col, exit 2, nothing written */
    build_text("abi0", abi_source(MPCSIM_PLUGIN_ABI_MAJOR + 1, 0, "abi0"));
    char *scn = strdup(th_file(&td, "s.yaml",
                               "format: 1\nname: s\nprotocol: semi2k\nnetwork: lan\ncases:\n"
                               "  - model: stories260K\n"
                               "    workload: {prompt_len: 8, decode_len: 4}\n"
                               "    policies: [{plugin: abi0.so}]\n"));
    char *db = strdup(tpath("s.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("out.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 2);
    const char *msg = th_text(tpath("out.txt"));
    ck_assert_msg(strstr(msg, "s.yaml:8:25: error: ") && strstr(msg, "built against policy ABI"),
                  "%s", msg);
    ck_assert(!th_exists(db));
    free(scn);
    free(db);
}
END_TEST

START_TEST(test_no_entry)
{
    errbuf e;
    const policy_ops *p = NULL;
    const char *so = build_text("noentry", "int mpcsim_policy(void);\n"
                                           "int mpcsim_policy(void) { return 1; }\n");
    ck_assert_int_eq(policy_plugin_load(so, &p, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, so) == e.msg && strstr(e.msg, "exports no 'mpcsim_policy_plugin'"),
                  "%s", e.msg);
    /* not a shared object at all */
    const char *txt = th_file(&td, "text.so", "not an ELF file\n");
    ck_assert_int_eq(policy_plugin_load(txt, &p, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "cannot load the plug-in"), "%s", e.msg);
    ck_assert_int_eq(policy_plugin_load(tpath("absent.so"), &p, &e), MS_ERR_NOTFOUND);
}
END_TEST

/* The command line: `list policies --plugin`, `validate --policy PATH.so`, and a plug-in of
 * another ABI refused there. */
START_TEST(test_cli)
{
    char *so = strdup(build_plugin(th_data_path("scenarios/plugins/keynorm.c"), "keynorm.so"));
    char out[16384];
    th_cli_expect(out, sizeof out, 0, "(plug-in ", "list policies --plugin '%s'", so);
    ck_assert_msg(strstr(out, "\nkeynorm ") && strstr(out, so), "%s", out);
    th_cli_expect(out, sizeof out, 0, "bytes and rounds of every op of the 5 steps equal",
                  "validate --model stories260K --accuracy 12 --prompt 8 --protocol semi2k "
                  "--policy '%s' --policy-param keep=4 --text '%s'",
                  so, th_data_path("tests/data/tinystories_sample.txt"));
    ck_assert_msg(strstr(out, "under keynorm"), "%s", out);
    char *bad = strdup(build_text("abicli", abi_source(MPCSIM_PLUGIN_ABI_MAJOR + 1, 0, "abicli")));
    th_cli_expect(out, sizeof out, 2, "built against policy ABI",
                  "validate --model stories260K --accuracy 12 --prompt 8 --policy '%s'", bad);
    th_cli_expect(out, sizeof out, 2, "built against policy ABI", "list policies --plugin '%s'",
                  bad);
    free(so);
    free(bad);
}
END_TEST

/* `make install-headers` (part of `make install`) with DESTDIR: the header and
 * mpcsim-plugin.pc, whose Cflags build the example plug-in outside the tree. */
START_TEST(test_install)
{
    char *root = strdup(tpath("root"));
    char cmd[4096], out[4096];
    snprintf(cmd, sizeof cmd,
             "MAKEFLAGS= MAKELEVEL= make -s -C '%s' install-headers PREFIX=/opt/x DESTDIR='%s'",
             th_data(), root);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s/opt/x/include/mpcsim/policy_plugin.h", root);
    ck_assert(th_exists(cmd));
    /* the command POLICIES.md gives, verbatim, in a folder with the plug-in's source */
    const char *doc = th_text(th_data_path("sim/policy/POLICIES.md"));
    ck_assert_msg(strstr(doc, DOC_CC), "POLICIES.md no longer says: %s", DOC_CC);
    snprintf(cmd, sizeof cmd, "%s/keynorm.c", root);
    th_copy(th_data_path("scenarios/plugins/keynorm.c"), cmd);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && export PKG_CONFIG_PATH='%s/opt/x/lib/pkgconfig' "
             "PKG_CONFIG_SYSROOT_DIR='%s' && %s",
             root, root, root, DOC_CC);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s/keynorm.so", root);
    char *so = strdup(cmd);
    errbuf e;
    const policy_ops *p;
    ck_assert_msg(policy_plugin_load(so, &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(p->name, "keynorm");
    free(root);
    free(so);
}
END_TEST

/* The shipped scenarios/plugin-keynorm.yaml on build/plugins/keynorm.so (`make check` builds
 * it through `make plugins`): every run recorded, the plug-in's with a nonzero policy cost. */
START_TEST(test_shipped_scenario)
{
    const char *so = th_data_path("build/plugins/keynorm.so");
    ck_assert_msg(th_exists(so), "%s is missing: run `make plugins` (make check does)", so);
    char *db = strdup(tpath("ship.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("ship.txt"), NULL, "run",
                             th_data_path("scenarios/plugin-keynorm.yaml"), "-o", db, (char *)NULL),
                     0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(h,
                                        "SELECT (SELECT COUNT(*) FROM runs WHERE status = 'ok'), "
                                        "(SELECT SUM(b.bytes_p0) FROM breakdown b JOIN runs r ON "
                                        "r.id = b.run_id WHERE r.policy = 'keynorm' AND "
                                        "b.category = 'policy')",
                                        -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(q, 0), 3);
    ck_assert_int_gt(sqlite3_column_int64(q, 1), 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    free(db);
}
END_TEST

/* ---- ABI 1.1 ----------------------------------------------------------------------------- */

/* keynorm's kept count per KV head at the first decode step of a 32-token prompt under the
 * given parameters (each "key=value" at line i + 3, column 5 of t.yaml), or -1 with the error
 * in e. */
static int keynorm_kept(const policy_ops *p, const char *const *kvs, size_t n, errbuf *e)
{
    kv_param kv[8];
    for (size_t i = 0; i < n; i++) {
        char key[48];
        const char *eq = strchr(kvs[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - kvs[i]), kvs[i]);
        kv[i] = fixture_kvp(key, eq + 1, (int)i + 3, 5);
    }
    policy_args a;
    if (policy_args_load(p, kv, n, "t.yaml", &a, e))
        return -1;
    const uint32_t L = 2, Hkv = 2, d = 4, P = 32, T = 40;
    policy_env env = {L, 2, Hkv, d, 8, 16, P, T, NULL, NULL, NULL, 1, NULL};
    void *st = NULL;
    if (p->init(&env, &a, &st, e))
        return -1;
    float k[8];
    for (uint32_t pos = 0; pos < P; pos++)
        for (uint32_t l = 0; l < L; l++) {
            for (int i = 0; i < 8; i++)
                k[i] = (float)((pos * 7 + (uint32_t)i * 3) % 11);
            policy_obs o = {.layer = l, .pos = pos, .k = k};
            ck_assert_int_eq(p->observe(st, &o, e), MS_OK);
        }
    uint8_t keep[2 * 40];
    ck_assert_int_eq(p->select(st, 0, P, NULL, keep, e), MS_OK);
    int kept = 0;
    for (uint32_t j = 0; j < P; j++)
        kept += keep[j];
    p->fini(st);
    return kept;
}

/* kv_budget mapped by the plug-in (keynorm: round(F·P) entries, the sinks among them), its own
 * budget parameter beside it refused, its check hook's rule at file:line:col. */
START_TEST(test_abi11_budget_check)
{
    const char *so = build_plugin(th_data_path("scenarios/plugins/keynorm.c"), "keynorm.so");
    errbuf e;
    const policy_ops *p = NULL;
    ck_assert_msg(policy_plugin_load(so, &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"keep=12"}, 1, &e), 16);
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"kv_budget=0.25"}, 1, &e), 8);
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"kv_budget=0.5", "sink=2"}, 2, &e), 16);
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"kv_budget=0.25", "keep=12"}, 2, &e),
                     -1);
    ck_assert_msg(strstr(e.msg, "t.yaml:4:5: error: ") && strstr(e.msg, "both set the budget"),
                  "%s", e.msg);
    /* kv_budget that leaves nothing beside the sinks: init's error at kv_budget */
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"kv_budget=0.1", "sink=4"}, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "t.yaml:3:5: error: kv_budget 0.1 keeps 3"), "%s", e.msg);
    /* the check hook: sink above keep */
    ck_assert_int_eq(keynorm_kept(p, (const char *const[]){"keep=6", "sink=8"}, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "t.yaml:4:5: error: keynorm: sink 8 is above keep 6"), "%s", e.msg);
    /* the same through a scenario: exit 2, nothing written */
    build_plugin(th_data_path("scenarios/plugins/keynorm.c"), "keynorm.so");
    char *scn = strdup(th_file(&td, "rule.yaml",
                               "format: 1\nname: s\nprotocol: semi2k\nnetwork: lan\ncases:\n"
                               "  - model: stories260K\n"
                               "    workload: {prompt_len: 8, decode_len: 4}\n"
                               "    policies: [{plugin: keynorm.so, keep: 2, sink: 3}]\n"));
    char *db = strdup(tpath("rule.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("rule.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 2);
    const char *msg = th_text(tpath("rule.txt"));
    ck_assert_msg(strstr(msg, "rule.yaml:8:46: error: keynorm: sink 3 is above keep 2"), "%s", msg);
    ck_assert(!th_exists(db));
    free(scn);
    free(db);
}
END_TEST

/* The common rule (budget_count: round(F·P) into one parameter), and a 1.0 plug-in: it loads,
 * and refuses kv_budget as a policy that maps none. */
static const char *const counted =
    "#include <mpcsim/policy_plugin.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "static const mpcsim_api *api;\n"
    "static const mpcsim_param ps[] = {{\"n\", \"3\", \"kept\", 1, 1e9, 1}};\n"
    "static int in(const mpcsim_env *v, const mpcsim_args *a, void **s, mpcsim_err *e)\n"
    "{ uint32_t *n = malloc(sizeof *n); *s = n; return api->arg_u32(a, \"n\", n, e); }\n"
    "static void fi(void *s) { free(s); }\n"
    "static int sel(void *s, uint32_t l, uint32_t p, const float *q, uint8_t *k, mpcsim_err *e)\n"
    "{ uint32_t n = *(uint32_t *)s; memset(k, 0, p); memset(k, 1, n < p ? n : p); return 0; }\n"
    "static const mpcsim_policy pol = {.abi_major = 1, .abi_minor = MINOR, .name = NAME,\n"
    "    .params = ps, .n_params = 1, .init = in, .fini = fi, .select = sel COUNT};\n"
    "const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *a) { api = a; return &pol; }\n";

static int counted_kept(const policy_ops *p, const char *val, errbuf *e)
{
    kv_param kv[1] = {fixture_kvp(val ? "kv_budget" : "n", val ? val : "3", 3, 5)};
    policy_args a;
    if (policy_args_load(p, kv, 1, "t.yaml", &a, e))
        return -1;
    policy_env env = {1, 1, 1, 4, 4, 8, 20, 24, NULL, NULL, NULL, 1, NULL};
    void *st = NULL;
    if (p->init(&env, &a, &st, e))
        return -1;
    uint8_t keep[20];
    ck_assert_int_eq(p->select(st, 0, 20, NULL, keep, e), MS_OK);
    int n = 0;
    for (int j = 0; j < 20; j++)
        n += keep[j];
    p->fini(st);
    return n;
}

START_TEST(test_abi11_common_rule)
{
    char src[4096];
    errbuf e;
    const policy_ops *p = NULL;
    snprintf(src, sizeof src,
             "#define MINOR 1\n#define NAME \"counted\"\n#define COUNT "
             ", .budget_count = \"n\"\n%s",
             counted);
    ck_assert_msg(policy_plugin_load(build_text("counted", src), &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(counted_kept(p, NULL, &e), 3);
    ck_assert_int_eq(counted_kept(p, "0.25", &e), 5); /* round(0.25 · 20) */
    ck_assert_int_eq(counted_kept(p, "0.5", &e), 10);
    /* a 1.0 plug-in: loads, and kv_budget is refused at its place */
    snprintf(src, sizeof src, "#define MINOR 0\n#define NAME \"counted_old\"\n#define COUNT\n%s",
             counted);
    ck_assert_msg(policy_plugin_load(build_text("counted_old", src), &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(counted_kept(p, NULL, &e), 3);
    ck_assert_int_eq(counted_kept(p, "0.25", &e), -1);
    ck_assert_msg(strstr(e.msg, "t.yaml:3:5: error: ") &&
                      strstr(e.msg, "does not map kv_budget to a budget of its own"),
                  "%s", e.msg);
    /* budget_count naming no whole parameter: refused at load */
    snprintf(src, sizeof src,
             "#define MINOR 1\n#define NAME \"counted_bad\"\n#define COUNT "
             ", .budget_count = \"m\"\n%s",
             counted);
    const char *bad = build_text("counted_bad", src);
    ck_assert_int_eq(policy_plugin_load(bad, &p, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "budget_count 'm' is not one of its whole-number parameters"), "%s",
                  e.msg);
}
END_TEST

Suite *plugin_suite(void)
{
    Suite *s = suite_create("plugin");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_keynorm_kept, test_keynorm_scenario, test_abi_mismatch, test_no_entry,
             test_cli, test_install, test_shipped_scenario, test_abi11_budget_check,
             test_abi11_common_rule);
    return s;
}

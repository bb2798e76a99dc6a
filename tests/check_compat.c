/* check_compat.c — framework cost profiles (protocol key compat): each profile's per-element
 * bytes and rounds against the counts derived from the framework's source
 * (tests/data/compat-counts.tsv, from PRIMITIVES.md), the option's parsing, and that native
 * is the configuration without the key. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/kern.h"
#include "protocols/program/proto.h"

enum { N_ELEM = 64 };

typedef struct counted {
    uint64_t bytes, rounds;
} counted;

static int kind_of(const char *name)
{
    static const struct {
        const char *name;
        int kind;
    } k[] = {{"trunc", OP_TRUNC},           {"exp", OP_EXP},  {"lt", OP_LT}, {"select", OP_SELECT},
             {"reciprocal", OP_RECIPROCAL}, {"gelu", OP_GELU}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (!strcmp(k[i].name, name))
            return k[i].kind;
    return -1;
}

/* One element-wise op of `kind` on N_ELEM elements under protocol pname with compat profile:
 * online bytes summed over every party, and rounds. */
static counted cost_ew(const char *pname, const char *profile, int kind)
{
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, 1, N_ELEM);
    uint32_t o = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, 1, 1, N_ELEM);
    op q = {.kind = (uint16_t)kind,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 1,
            .k = 1,
            .n = N_ELEM,
            .in = {x, kind == OP_LT || kind == OP_SELECT ? x : OP_NONE,
                   kind == OP_SELECT ? x : OP_NONE},
            .out = o};
    ck_assert_int_ge(op_emit(&p, &q), 0);
    const proto *pr = proto_find(pname);
    ck_assert_ptr_nonnull(pr);
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(pname, &cfg, &e), 0);
    ck_assert_msg(proto_cfg_set(&cfg, "compat", profile, &e) == 0, "%s", e.msg);
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, &cfg, &p, &lg, &e) == 0, "%s", e.msg);
    cost_totals t = {0};
    for (size_t i = 0; i < lg.n; i++)
        cost_totals_add_round(&t, &lg.r[i], lg.n_parties);
    counted c = {0, t.rounds};
    for (int s = 0; s < pr->n_parties; s++)
        c.bytes += t.bytes_sent[s];
    cost_log_free(&lg);
    op_program_free(&p);
    return c;
}

START_TEST(test_profile_counts)
{
    FILE *f = fopen(th_data_path("tests/data/compat-counts.tsv"), "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char prof[16], pname[16], opn[16];
        unsigned long long bytes, rounds;
        if (line[0] == '#' ||
            sscanf(line, "%15s %15s %15s %llu %llu", prof, pname, opn, &bytes, &rounds) != 5)
            continue;
        int kind = kind_of(opn);
        ck_assert_msg(kind >= 0, "compat-counts.tsv: unknown op '%s'", opn);
        counted c = cost_ew(pname, prof, kind);
        ck_assert_msg(c.bytes == bytes * N_ELEM && c.rounds == rounds,
                      "%s %s %s: %llu B/element in %llu rounds, derived %llu B in %llu", prof,
                      pname, opn, (unsigned long long)(c.bytes / N_ELEM),
                      (unsigned long long)c.rounds, bytes, rounds);
        rows++;
    }
    fclose(f);
    ck_assert_int_ge(rows, 4);
}
END_TEST

/* compat: native is the configuration without the key (today's constructions: aby3's
 * truncation pair is 43 B at f = 18, PRIMITIVES.md); an unknown profile is refused with the
 * names; spu resolves to its variants whatever the family keys say. */
START_TEST(test_native_default)
{
    for (int p = 0; p < 2; p++) {
        const char *pname = p ? "aby3" : "semi2k";
        proto_cfg d, n;
        errbuf e;
        ck_assert_int_eq(proto_cfg_default(pname, &d, &e), 0);
        n = d;
        ck_assert_int_eq(proto_cfg_set(&n, "compat", "native", &e), 0);
        ck_assert_int_eq(memcmp(&d, &n, sizeof d), 0);
        ck_assert_int_ne(proto_cfg_set(&n, "compat", "spdz", &e), 0);
        ck_assert_ptr_nonnull(strstr(e.msg, "'native' or 'spu'"));
        kern_conf kv;
        ck_assert_int_eq(kern_configure(&d, &kv), 0);
        ck_assert_int_eq(kv.compat, KV_COMPAT_NATIVE);
        ck_assert_int_eq(kv.trunc, KV_TRUNC_PAIR);
        ck_assert_int_eq(proto_cfg_set(&n, "exp", "pow2", &e), 0);
        ck_assert_int_eq(proto_cfg_set(&n, "compat", "spu", &e), 0);
        ck_assert_int_eq(kern_configure(&n, &kv), 0);
        ck_assert_int_eq(kv.compat, KV_COMPAT_SPU);
        ck_assert_int_eq(kv.trunc, KV_TRUNC_SPU);
        ck_assert_int_eq(kv.exp, KV_EXP_TAYLOR);
    }
    counted t = cost_ew("aby3", "native", OP_TRUNC);
    ck_assert_uint_eq(t.bytes, 43 * N_ELEM);
    ck_assert_uint_eq(t.rounds, 2);
}
END_TEST

Suite *compat_suite(void)
{
    Suite *s = suite_create("compat");
    TCase *tc = th_case(s, "profiles", 60);
    TH_TESTS(tc, test_profile_counts, test_native_default);
    return s;
}

/* check_crypten.c — the CrypTen profile (compat: crypten): which variants it resolves to and
 * that aby3 is refused with the reason. The per-element bytes and rounds are pinned in
 * tests/data/compat-counts.tsv (check_compat.c). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/kern.h"
#include "protocols/program/proto.h"

START_TEST(test_crypten_profile)
{
    proto_cfg c;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &c, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c, "exp", "pade", &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c, "compat", "crypten", &e), 0);
    kern_conf kv;
    ck_assert_int_eq(kern_configure(&c, &kv), 0);
    ck_assert_int_eq(kv.compat, KV_COMPAT_CRYPTEN);
    ck_assert_int_eq(kv.trunc, KV_TRUNC_LOCAL);
    ck_assert_int_eq(kv.msb, KV_MSB_CRYPTEN);
    ck_assert_int_eq(kv.exp, KV_EXP_TAYLOR); /* exp: pade is SPU's mode, not CrypTen's */
    ck_assert_str_eq(kern_variant_name("compat", kv.compat), "crypten");
    /* aby3: refused when the key is set, whatever the order, and by the engines */
    ck_assert_int_eq(proto_cfg_default("aby3", &c, &e), 0);
    ck_assert_int_ne(proto_cfg_set(&c, "compat", "crypten", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "compat: crypten has no aby3 profile"));
    ck_assert_ptr_nonnull(strstr(e.msg, "semi2k"));
    ck_assert_str_eq(c.compat, "native"); /* nothing half-set */
    snprintf(c.compat, sizeof c.compat, "crypten");
    ck_assert_int_ne(kern_configure(&c, &kv), 0);
    ck_assert_int_ne(kern_compat_check(&c, &e), 0);
}
END_TEST

Suite *crypten_suite(void)
{
    Suite *s = suite_create("crypten");
    TCase *tc = th_case(s, "profile", 60);
    TH_TESTS(tc, test_crypten_profile);
    return s;
}

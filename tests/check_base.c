/* check_base.c — the base module (protocols/base/err.h) and the backend's PRG
 * (protocols/backend/mpc_prg.h): error codes and their exit statuses, messages, checked number
 * parsing, did-you-mean; AES-128-CTR against its known answer, streams, chunking. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/backend/mpc_prg.h"
#include "protocols/base/err.h"

START_TEST(test_err_codes)
{
    ck_assert_int_eq(ms_err_exit_code(MS_OK), 0);
    ck_assert_int_eq(ms_err_exit_code(MS_ERR_USAGE), 2);
    ck_assert_int_eq(ms_err_exit_code(MS_ERR_INPUT), 2);
    ck_assert_int_eq(ms_err_exit_code(MS_ERR_IO), 1);
    ck_assert_int_eq(ms_err_exit_code(MS_ERR_PEER), 3);
    ck_assert_str_eq(ms_err_name(MS_ERR_INPUT), "ERR_INPUT");
    ck_assert_str_eq(ms_err_text(MS_ERR_RANGE), "value out of range");
    errbuf e;
    ck_assert_int_eq(err_set(&e, MS_ERR_FORMAT, "%s:%d:%d: error: %s", "f.yaml", 3, 7, "bad"),
                     MS_ERR_FORMAT);
    ck_assert_str_eq(e.msg, "f.yaml:3:7: error: bad");
    ck_assert_int_eq(err_set(NULL, MS_ERR_NOMEM, "no buffer"), MS_ERR_NOMEM); /* e may be NULL */
    char big[2 * sizeof e.msg];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    err_set(&e, MS_ERR_INPUT, "%s", big); /* cut, still terminated */
    ck_assert_uint_eq(strlen(e.msg), sizeof e.msg - 1);
    /* a message may wrap the one already in the buffer */
    err_set(&e, MS_ERR_INPUT, "inner %d", 7);
    err_set(&e, MS_ERR_PEER, "node %d: %s (after %s)", 2, e.msg, e.msg);
    ck_assert_str_eq(e.msg, "node 2: inner 7 (after inner 7)");
}
END_TEST

/* Each text and what the checked parsers make of it. */
static const struct {
    const char *s;
    int d_ok, i_ok, u_ok;
    double d;
    long long i;
    unsigned long long u;
} nums[] = {
    {"42", 1, 1, 1, 42, 42, 42},
    {"-7", 1, 1, 0, -7, -7, 0},
    {"2.5e3", 1, 0, 0, 2500, 0, 0},
    {"18446744073709551615", 1, 0, 1, 18446744073709551615.0, 0, 18446744073709551615ull},
    {"18446744073709551616", 1, 0, 0, 18446744073709551616.0, 0, 0},
    {"9223372036854775808", 1, 0, 1, 9223372036854775808.0, 0, 9223372036854775808ull},
    {"", 0, 0, 0, 0, 0, 0},
    {"12abc", 0, 0, 0, 0, 0, 0},
    {" 5", 1, 1, 1, 5, 5, 5}, /* strto* skip leading blanks */
    {"5 ", 0, 0, 0, 0, 0, 0},
    {"nan", 0, 0, 0, 0, 0, 0},
    {"inf", 0, 0, 0, 0, 0, 0},
    {"1e400", 0, 0, 0, 0, 0, 0},
};

START_TEST(test_parse_numbers)
{
    double d = -1;
    long long i = -1;
    unsigned long long u = 1;
    ck_assert_int_eq(parse_double(nums[_i].s, &d) == 0, nums[_i].d_ok);
    ck_assert_int_eq(parse_i64(nums[_i].s, &i) == 0, nums[_i].i_ok);
    ck_assert_int_eq(parse_u64(nums[_i].s, &u) == 0, nums[_i].u_ok);
    if (nums[_i].d_ok)
        ck_assert(d == nums[_i].d);
    if (nums[_i].i_ok)
        ck_assert_int_eq(i, nums[_i].i);
    if (nums[_i].u_ok)
        ck_assert(u == nums[_i].u);
}
END_TEST

START_TEST(test_did_you_mean)
{
    ck_assert_uint_eq(edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(edit_distance("", "abc"), 3);
    ck_assert_uint_eq(edit_distance("same", "same"), 0);
    const char *const words[] = {"semi2k", "aby3", "prefill", "decode"};
    ck_assert_str_eq(did_you_mean("semi3k", words, 4), "semi2k");
    ck_assert_str_eq(did_you_mean("decod", words, 4), "decode");
    ck_assert_ptr_null(did_you_mean("zzzzzzzz", words, 4));
}
END_TEST

START_TEST(test_prg_known_answer)
{
    /* AES-128 of the zero block under the zero key (FIPS-197 test vectors' well-known value): the
     * first keystream block of stream 0, whose counter starts at zero */
    static const uint8_t want[16] = {0x66, 0xe9, 0x4b, 0xd4, 0xef, 0x8a, 0x2c, 0x3b,
                                     0x88, 0x4c, 0xfa, 0x59, 0xca, 0x34, 0x2b, 0x2e};
    uint8_t key[MPC_KEY_BYTES] = {0}, got[16];
    mpc_prg g;
    errbuf e;
    ck_assert_int_eq(mpc_prg_init(&g, key, 0, &e), MS_OK);
    mpc_prg_bytes(&g, got, sizeof got);
    ck_assert_mem_eq(got, want, 16);
    ck_assert_uint_eq(g.drawn, 16);
    mpc_prg_free(&g);
}
END_TEST

START_TEST(test_prg_streams_and_chunks)
{
    uint8_t key[MPC_KEY_BYTES], a[100], b[100], c[100];
    for (int i = 0; i < MPC_KEY_BYTES; i++)
        key[i] = (uint8_t)(i * 37 + 1);
    mpc_prg g, h, k;
    errbuf e;
    ck_assert_int_eq(mpc_prg_init(&g, key, 5, &e), MS_OK);
    ck_assert_int_eq(mpc_prg_init(&h, key, 5, &e), MS_OK);
    ck_assert_int_eq(mpc_prg_init(&k, key, 6, &e), MS_OK);
    mpc_prg_bytes(&g, a, 100);
    mpc_prg_bytes(&h, b, 7); /* the same stream in other chunks: the same bytes */
    mpc_prg_bytes(&h, b + 7, 13);
    mpc_prg_bytes(&h, b + 20, 80);
    mpc_prg_bytes(&k, c, 100);
    ck_assert_mem_eq(a, b, 100);
    ck_assert(memcmp(a, c, 100) != 0); /* another stream id: another keystream */
    ck_assert_uint_eq(h.drawn, 100);
    mpc_prg_free(&g), mpc_prg_free(&h), mpc_prg_free(&k);
    /* one draw longer than any internal chunk against the same stream in 16-byte blocks */
    enum { LONG = 100003 };
    uint8_t *one = malloc(LONG), *blk = malloc(LONG);
    ck_assert(one && blk);
    ck_assert_int_eq(mpc_prg_init(&g, key, 9, &e), MS_OK);
    ck_assert_int_eq(mpc_prg_init(&h, key, 9, &e), MS_OK);
    mpc_prg_bytes(&g, one, LONG);
    for (size_t at = 0; at < LONG; at += 16)
        mpc_prg_bytes(&h, blk + at, LONG - at < 16 ? LONG - at : 16);
    ck_assert_mem_eq(one, blk, LONG);
    ck_assert_uint_eq(g.drawn, LONG);
    size_t zeros = 0;
    for (size_t i = LONG - 64; i < LONG; i++)
        zeros += one[i] == 0;
    ck_assert_uint_lt(zeros, 8); /* the tail is keystream, not an unwritten buffer */
    free(one), free(blk);
    mpc_prg_free(&g), mpc_prg_free(&h);
    uint8_t k1[MPC_KEY_BYTES], k2[MPC_KEY_BYTES];
    ck_assert_int_eq(mpc_prg_random_key(k1, &e), MS_OK);
    ck_assert_int_eq(mpc_prg_random_key(k2, &e), MS_OK);
    ck_assert(memcmp(k1, k2, MPC_KEY_BYTES) != 0);
    mpc_prg_wipe(k1, sizeof k1);
    static const uint8_t zero[MPC_KEY_BYTES];
    ck_assert_mem_eq(k1, zero, MPC_KEY_BYTES);
}
END_TEST

Suite *base_suite(void)
{
    Suite *s = suite_create("base");
    TCase *tc = th_case(s, "base", 0);
    TH_TESTS(tc, test_err_codes);
    TH_LOOPS(tc, sizeof nums / sizeof nums[0], test_parse_numbers);
    TH_TESTS(tc, test_did_you_mean, test_prg_known_answer, test_prg_streams_and_chunks);
    return s;
}

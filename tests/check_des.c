/* check_des.c — the event engine: (time, seq) order, FIFO ties, monotone time, heap sanity. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include <gsl/gsl_rng.h>

#include "harness.h"
#include "sim/engine/des.h"

START_TEST(test_order_random)
{
    /* events popped in nondecreasing time; equal times in schedule order */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 42);
    des *q = des_new(4);
    ck_assert_ptr_nonnull(q);
    enum { N = 20000 };
    static uint64_t when[N];
    for (uint64_t i = 0; i < N; i++) {
        when[i] = gsl_rng_uniform_int(rng, 500); /* many ties */
        ck_assert_int_eq(des_schedule(q, when[i], i), 0);
    }
    ck_assert(des_is_sane(q));
    ck_assert_uint_eq(des_pending(q), N);
    des_event ev, prev = {0, 0, 0};
    size_t n = 0;
    while (des_pop(q, &ev)) {
        ck_assert_uint_eq(ev.time, when[ev.data]);
        if (n > 0) {
            ck_assert_uint_ge(ev.time, prev.time);
            if (ev.time == prev.time)
                ck_assert_uint_gt(ev.data, prev.data); /* FIFO: scheduled earlier, runs first */
        }
        ck_assert_uint_eq(des_now(q), ev.time);
        prev = ev;
        n++;
        if (n % 997 == 0)
            ck_assert(des_is_sane(q));
    }
    ck_assert_uint_eq(n, N);
    ck_assert_uint_eq(des_processed(q), N);
    des_free(q);
    gsl_rng_free(rng);
}
END_TEST

START_TEST(test_fifo_ties_interleaved)
{
    /* events scheduled while running, at the current time, run after those already queued
     * for that time */
    des *q = des_new(2);
    des_schedule(q, 10, 1);
    des_schedule(q, 10, 2);
    des_schedule(q, 5, 0);
    des_event ev;
    uint64_t order[8];
    int n = 0;
    while (des_pop(q, &ev)) {
        order[n++] = ev.data;
        if (ev.data == 0)
            des_schedule(q, 10, 3); /* same time as 1 and 2, scheduled later */
        if (ev.data == 1)
            des_schedule(q, 10, 4);
    }
    ck_assert_int_eq(n, 5);
    uint64_t want[] = {0, 1, 2, 3, 4};
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(order[i], want[i]);
    des_free(q);
}
END_TEST

START_TEST(test_monotone_with_rescheduling)
{
    /* a self-scheduling workload: each event schedules up to two more in its future */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    des *q = des_new(1);
    for (int i = 0; i < 100; i++)
        des_schedule(q, gsl_rng_uniform_int(rng, 1000), (uint64_t)i);
    des_event ev;
    uint64_t last = 0, popped = 0;
    while (des_pop(q, &ev)) {
        ck_assert_uint_ge(ev.time, last);
        last = ev.time;
        popped++;
        if (popped < 50000) {
            des_schedule(q, ev.time + gsl_rng_uniform_int(rng, 50), ev.data);
            if (gsl_rng_uniform(rng) < 0.3)
                des_schedule(q, ev.time, ev.data + 1);
        }
    }
    ck_assert(des_is_sane(q));
    ck_assert_uint_eq(des_processed(q), popped);
    des_reset(q);
    ck_assert_uint_eq(des_now(q), 0);
    ck_assert_uint_eq(des_pending(q), 0);
    ck_assert_int_eq(des_pop(q, &ev), 0);
    des_free(q);
    gsl_rng_free(rng);
}
END_TEST

Suite *des_suite(void)
{
    Suite *s = suite_create("des");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_order_random, test_fifo_ties_interleaved, test_monotone_with_rescheduling);
    return s;
}

/* check_fuzz.c — every fuzz target (tests/fuzz/fuzz.h) over its seed corpus and its regression
 * inputs (tests/fuzz/corpus/<target>/, tests/fuzz/regress/<target>/): an input that once
 * crashed a parser stays in make check, in the release and the sanitizer build. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/backend/mpc_net.h"
#include "tests/fuzz/fuzz.h"

/* Runs fn on every file of dir; returns how many. */
static int replay_dir(const fuzz_target *t, const char *kind)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s", th_data(), kind, t->name);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len;
        char *buf = th_slurp(path, &len);
        t->fn((const uint8_t *)buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

START_TEST(test_replay)
{
    const fuzz_target *t = &fuzz_targets[_i];
    int seeds = replay_dir(t, "corpus");
    ck_assert_msg(seeds > 0, "fuzz target %s has no seed corpus", t->name);
    replay_dir(t, "regress");
}
END_TEST

/* The frames seeds speak this build's frame version: every header of "hellos" is a hello some
 * session takes, or the round data frame the target checks, so the fuzzer starts past the
 * version check (seeds of an older version reach only its refusal). */
START_TEST(test_frame_seeds)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/frames/hellos", th_data());
    size_t len;
    char *buf = th_slurp(path, &len);
    ck_assert_msg(buf && len >= MPC_FRAME_HDR && len % MPC_FRAME_HDR == 0, "%s: %zu bytes", path,
                  len);
    for (size_t off = 0; off < len; off += MPC_FRAME_HDR) {
        const uint8_t *h = (const uint8_t *)buf + off;
        int taken = 0;
        errbuf e;
        for (int nodes = 2; nodes <= MPC_NODES_MAX; nodes++)
            for (int self = 0; self < nodes; self++)
                for (int tls = 0; tls < 2; tls++) {
                    int id, chan;
                    taken |= mpc_net_hello_parse(h, nodes, self, tls, &id, &chan, &e) == MS_OK;
                }
        mpc_frame f;
        mpc_frame_decode(h, &f);
        taken |= mpc_frame_check(&f, MPC_FR_DATA, 0, 64, &e) == MS_OK;
        ck_assert_msg(taken, "%s: header %zu (version %u) is taken by no session", path,
                      off / MPC_FRAME_HDR, f.ver);
    }
    free(buf);
}
END_TEST

Suite *fuzz_suite(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = th_case(s, "replay", 60);
    TH_LOOPS(tc, (int)fuzz_n_targets, test_replay);
    TH_TESTS(tc, test_frame_seeds);
    return s;
}

/* check_fuzz.c — every fuzz target (tests/fuzz/fuzz.h) over its seed corpus and its regression
 * inputs (tests/fuzz/corpus/<target>/, tests/fuzz/regress/<target>/): an input that once
 * crashed a parser stays in make check, in the release and the sanitizer build. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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

Suite *fuzz_suite(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = th_case(s, "replay", 60);
    TH_LOOPS(tc, (int)fuzz_n_targets, test_replay);
    return s;
}

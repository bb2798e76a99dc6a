/* testdir.h — per-suite and per-test temporary folders for the Check suites.
 *
 * A suite's folder is made by its unchecked fixture and removed there even after a failed test
 * (Check skips checked teardowns then); each test gets a fresh subfolder. */
#ifndef MPCSIM_TESTDIR_H
#define MPCSIM_TESTDIR_H

typedef struct testdir {
    char prefix[32]; /* "check_cli": names the suite's folder in messages and /tmp */
    char base[64];   /* /tmp/<prefix>_XXXXXX, one per suite run */
    char dir[256];   /* <base>/t_XXXXXX, one per test */
} testdir;

void testdir_suite_setup(testdir *t);    /* unchecked fixture */
void testdir_suite_teardown(testdir *t); /* unchecked fixture */
void testdir_setup(testdir *t);          /* checked fixture */
void testdir_teardown(testdir *t);       /* checked fixture */
/* <dir>/<name>; the result lives until eight more calls. */
const char *testdir_path(const testdir *t, const char *name);

/* A suite's folders: TESTDIR("check_x") at file scope defines td and its fixtures,
 * TESTDIR_USE(tc) gives them to a test case (every test then has td.dir of its own). */
#define TESTDIR(name)                                                    \
    static testdir td = {.prefix = name};                                \
    static void td_suite_setup(void) { testdir_suite_setup(&td); }       \
    static void td_suite_teardown(void) { testdir_suite_teardown(&td); } \
    static void td_setup(void) { testdir_setup(&td); }                   \
    static void td_teardown(void) { testdir_teardown(&td); }
#define TESTDIR_USE(tc)                                                     \
    do {                                                                    \
        tcase_add_unchecked_fixture(tc, td_suite_setup, td_suite_teardown); \
        tcase_add_checked_fixture(tc, td_setup, td_teardown);               \
    } while (0)

#endif

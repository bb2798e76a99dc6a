/* check_gnuplot.c — the one gnuplot driver (sim/cli/gnuplot.h): strings escaped so that
 * gnuplot reads back exactly what was meant (quotes, backslashes, shell and gnuplot
 * metacharacters), its exit status passed on, a missing gnuplot said as 127. gnuplot itself
 * is needed for the round trips (scripts/install-deps.sh installs gnuplot-nox). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sim/cli/gnuplot.h"

TESTDIR("check_gnuplot")

/* Values a title or a path may hold. gnuplot runs `cmd` inside a double-quoted string as a
 * shell command and expands @name macros on command lines: both must come back as text. */
static const char *const hostile[] = {
    "plain",
    "say \"hi\"",
    "back\\slash",
    "C:\\dir\\",
    "it's $HOME ;rm",
    "tab\there",
    "ends with a quote\"",
    "\\\"",
    "",
    "`echo PWNED`",
    "x `touch gp-ran` y",
    "@v",
    "''",
    "'",
};
#define N_HOSTILE (sizeof hostile / sizeof hostile[0])

/* gnuplot_var's expression defines v; gnuplot prints it back into a file, unchanged. */
START_TEST(test_var_round_trip)
{
    const char *val = hostile[_i], *got = testdir_path(&td, "got.txt");
    char expr[1024] = "";
    ck_assert_int_eq(gnuplot_var(expr, sizeof expr, "v", val), 0);
    snprintf(expr + strlen(expr), sizeof expr - strlen(expr), "set print '%s'; print v", got);
    int rc = gnuplot_run(expr, NULL, 0, testdir_path(&td, "err.txt"));
    ck_assert_msg(rc == 0, "gnuplot exited %d for %s: %s", rc, expr,
                  th_text(testdir_path(&td, "err.txt")));
    char want[256];
    snprintf(want, sizeof want, "%s\n", val);
    ck_assert_str_eq(th_text(got), want);
}
END_TEST

/* gnuplot_str in a script file, two files run in order. */
START_TEST(test_str_in_script)
{
    const char *script = testdir_path(&td, "a.gp"), *got = testdir_path(&td, "got.txt");
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs("set print ", f);
    gnuplot_str(f, got);
    fputs("\n", f);
    for (size_t i = 0; i < N_HOSTILE; i++) {
        fputs("print ", f);
        gnuplot_str(f, hostile[i]);
        fputs("\n", f);
    }
    ck_assert_int_eq(fclose(f), 0);
    const char *second = th_file(&td, "b.gp", "print \"second\"\n");
    const char *files[2] = {script, second};
    ck_assert_int_eq(gnuplot_run("x = 1", files, 2, testdir_path(&td, "err.txt")), 0);
    char want[1024] = "";
    for (size_t i = 0; i < N_HOSTILE; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\n", hostile[i]);
    strcat(want, "second\n");
    ck_assert_str_eq(th_text(got), want);
    ck_assert_msg(access("gp-ran", F_OK) != 0, "gnuplot ran a backquoted command");
}
END_TEST

/* A value that does not fit appends nothing: the expression stays whole and terminated. */
START_TEST(test_var_too_long)
{
    char expr[20] = "a = 1; ";
    ck_assert_int_eq(gnuplot_var(expr, sizeof expr, "v", "quite a long value"), -1);
    ck_assert_str_eq(expr, "a = 1; ");
    ck_assert_int_eq(gnuplot_var(expr, sizeof expr, "v", "it's"), -1);
    ck_assert_int_eq(gnuplot_var(expr, sizeof expr, "v", "ok"), 0);
    ck_assert_str_eq(expr, "a = 1; v = \"ok\"; ");
}
END_TEST

START_TEST(test_exit_status)
{
    const char *err = testdir_path(&td, "err.txt");
    /* a script error: gnuplot's own status, its message in errlog */
    ck_assert_int_ne(gnuplot_run("this is not gnuplot", NULL, 0, err), 0);
    ck_assert_ptr_nonnull(strstr(th_text(err), "line"));
    const char *missing[1] = {testdir_path(&td, "none.gp")};
    ck_assert_int_ne(gnuplot_run(NULL, missing, 1, err), 0);
    /* no gnuplot on PATH: 127 */
    const char *path = getenv("PATH");
    char *saved = strdup(path ? path : "");
    setenv("PATH", td.dir, 1);
    int rc = gnuplot_run("print 1", NULL, 0, err);
    setenv("PATH", saved, 1);
    free(saved);
    ck_assert_int_eq(rc, 127);
}
END_TEST

Suite *gnuplot_suite(void)
{
    Suite *s = suite_create("gnuplot");
    TCase *tc = th_case(s, "gnuplot", 0);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, (int)N_HOSTILE, test_var_round_trip);
    TH_TESTS(tc, test_str_in_script, test_var_too_long, test_exit_status);
    return s;
}

/* testdir.c — temporary folders for the Check suites (testdir.h). */
#include "testdir.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void testdir_suite_setup(testdir *t)
{
    snprintf(t->base, sizeof t->base, "/tmp/%s_XXXXXX", t->prefix);
    ck_assert_ptr_nonnull(mkdtemp(t->base));
}

void testdir_suite_teardown(testdir *t)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->base);
    if (system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", t->prefix, t->base);
}

void testdir_setup(testdir *t)
{
    snprintf(t->dir, sizeof t->dir, "%s/t_XXXXXX", t->base);
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

void testdir_teardown(testdir *t)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    ck_assert_int_eq(system(cmd), 0);
}

const char *testdir_path(const testdir *t, const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t->dir, name);
    return buf[k];
}

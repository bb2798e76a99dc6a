/* testdir.c — temporary folders for the Check suites (testdir.h). */
#include "testdir.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A new folder <parent>/<name>_XXXXXX, its path into path. */
static void make_temp(char *path, size_t cap, const char *parent, const char *name)
{
    snprintf(path, cap, "%s/%s_XXXXXX", parent, name);
    ck_assert_ptr_nonnull(mkdtemp(path));
}

/* Removes path and everything below it: rm's exit status. */
static int remove_tree(const char *path)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

void testdir_suite_setup(testdir *t) { make_temp(t->base, sizeof t->base, "/tmp", t->prefix); }

void testdir_suite_teardown(testdir *t)
{
    if (remove_tree(t->base) != 0)
        fprintf(stderr, "%s: could not remove %s\n", t->prefix, t->base);
}

void testdir_setup(testdir *t) { make_temp(t->dir, sizeof t->dir, t->base, "t"); }

void testdir_teardown(testdir *t) { ck_assert_int_eq(remove_tree(t->dir), 0); }

const char *testdir_path(const testdir *t, const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t->dir, name);
    return buf[k];
}

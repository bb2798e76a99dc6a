/* check_datadir.c — the binary finds its data from any working directory: the build tree's
 * binary run from a temporary folder, an installed layout (bin/ + share/mpcsim/), and the
 * "not found" messages that name the folders searched and MPCSIM_DATA. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

TESTDIR("check_datadir")
static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* Runs exe args… (NULL-terminated) in cwd with MPCSIM_DATA = data (NULL: unset); stdout and
 * stderr go to out.txt / err.txt of the test's folder. Returns the exit status. */
static int run_in(const char *exe, const char *cwd, const char *data, const char *const *args)
{
    const char *was = getenv("MPCSIM_DATA");
    char *saved = was ? strdup(was) : NULL;
    if (data)
        setenv("MPCSIM_DATA", data, 1);
    else
        unsetenv("MPCSIM_DATA");
    pid_t pid = th_spawn(exe, args, cwd, tpath("out.txt"), tpath("err.txt"));
    if (saved)
        setenv("MPCSIM_DATA", saved, 1);
    else
        unsetenv("MPCSIM_DATA");
    free(saved);
    int st = th_wait(pid);
    ck_assert_msg(st < 128, "mpcsim did not exit normally");
    return st;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    th_copy(from, to);
    ck_assert_int_eq(chmod(to, mode), 0);
}

#define SCENARIO                                                                     \
    "model: llama-2-7b\nprotocol: semi2k\nnetwork: lan\nworkload: {prompt_len: 16, " \
    "decode_len: 2}\n"

/* The build tree's binary, run from a folder that holds no data and without MPCSIM_DATA. */
START_TEST(test_build_tree_from_elsewhere)
{
    th_write(tpath("s.yaml"), SCENARIO);
    const char *list[] = {"list", "models", NULL};
    ck_assert_int_eq(run_in(th_bin(), td.dir, NULL, list), 0);
    ck_assert_ptr_nonnull(strstr(th_text(tpath("out.txt")), "llama-2-7b"));
    const char *dry[] = {"run", "s.yaml", "--dry-run", NULL};
    int rc = run_in(th_bin(), td.dir, NULL, dry);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, th_text(tpath("err.txt")));
    ck_assert_ptr_nonnull(strstr(th_text(tpath("out.txt")), "llama-2-7b"));
}
END_TEST

/* An installed layout: PREFIX/bin/mpcsim finds PREFIX/share/mpcsim. */
START_TEST(test_installed_layout)
{
    const char *data = th_data();
    const char *dirs[] = {"prefix",
                          "prefix/bin",
                          "prefix/share",
                          "prefix/share/mpcsim",
                          "prefix/share/mpcsim/models",
                          "prefix/share/mpcsim/protocols",
                          "prefix/share/mpcsim/protocols/machines",
                          "work"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        ck_assert_int_eq(mkdir(tpath(dirs[i]), 0755), 0);
    char from[1024];
    copy_file(th_bin(), tpath("prefix/bin/mpcsim"), 0755);
    snprintf(from, sizeof from, "%s/models/gpt2.yaml", data);
    copy_file(from, tpath("prefix/share/mpcsim/models/gpt2.yaml"), 0644);
    snprintf(from, sizeof from, "%s/protocols/machines/default.yaml", data);
    copy_file(from, tpath("prefix/share/mpcsim/protocols/machines/default.yaml"), 0644);
    char exe[512];
    snprintf(exe, sizeof exe, "%s", tpath("prefix/bin/mpcsim"));
    const char *list[] = {"list", "models", NULL};
    ck_assert_int_eq(run_in(exe, tpath("work"), NULL, list), 0);
    const char *out = th_text(tpath("out.txt"));
    ck_assert_msg(strstr(out, "gpt2") && !strstr(out, "llama-2-7b"),
                  "expected only the installed model: %s", out);
    /* a model the installed copy lacks: the message names where it looked */
    th_write(tpath("work/s.yaml"), SCENARIO);
    const char *dry[] = {"run", "s.yaml", "--dry-run", NULL};
    ck_assert_int_eq(run_in(exe, tpath("work"), NULL, dry), 2);
    const char *err = th_text(tpath("err.txt"));
    ck_assert_msg(strstr(err, "s.yaml:1:8: error: unknown model 'llama-2-7b'"), "%s", err);
    ck_assert_msg(strstr(err, "MPCSIM_DATA (not set)"), "%s", err);
    ck_assert_msg(strstr(err, "prefix/share/mpcsim (the installed copy)"), "%s", err);
    /* a model file whose weights were not installed: recording says where it looked */
    snprintf(from, sizeof from, "%s/models/stories260K.yaml", data);
    copy_file(from, tpath("prefix/share/mpcsim/models/stories260K.yaml"), 0644);
    th_write(tpath("work/t.txt"), "Once upon a time there was a tiny model.\n");
    const char *rec[] = {"trace", "record", "--model", "stories260K", "--text",
                         "t.txt", "-o",     "tr",      NULL};
    ck_assert_int_ne(run_in(exe, tpath("work"), NULL, rec), 0);
    err = th_text(tpath("err.txt"));
    ck_assert_msg(strstr(err, "weights or tokenizer not found") &&
                      strstr(err, "MPCSIM_DATA (not set)"),
                  "%s", err);
    th_write(tpath("work/r.yaml"), "model: stories260K\nprotocol: semi2k\nnetwork: lan\n"
                                   "workload: {prompt_len: 4, decode_len: 2}\n"
                                   "trace: {source: record, text: t.txt}\n");
    const char *dry2[] = {"run", "r.yaml", "--dry-run", NULL};
    ck_assert_int_eq(run_in(exe, tpath("work"), NULL, dry2), 2);
    err = th_text(tpath("err.txt"));
    ck_assert_msg(strstr(err, "r.yaml:5:31: error:") && strstr(err, "tokenizer not found") &&
                      strstr(err, "MPCSIM_DATA (not set)"),
                  "%s", err);
}
END_TEST

/* MPCSIM_DATA pointing at a folder without models: both messages say so. */
START_TEST(test_not_found_names_mpcsim_data)
{
    ck_assert_int_eq(mkdir(tpath("empty"), 0755), 0);
    char data[512];
    snprintf(data, sizeof data, "%s", tpath("empty"));
    th_write(tpath("s.yaml"), SCENARIO);
    const char *dry[] = {"run", "s.yaml", "--dry-run", NULL};
    ck_assert_int_eq(run_in(th_bin(), td.dir, data, dry), 2);
    const char *err = th_text(tpath("err.txt"));
    char want[600];
    snprintf(want, sizeof want, "MPCSIM_DATA=%s", data);
    ck_assert_msg(strstr(err, "unknown model 'llama-2-7b'") && strstr(err, want), "%s", err);
    ck_assert_ptr_null(strstr(th_text(tpath("out.txt")), "llama")); /* nothing written */
    const char *list[] = {"list", "models", NULL};
    ck_assert_int_ne(run_in(th_bin(), td.dir, data, list), 0);
    err = th_text(tpath("err.txt"));
    ck_assert_msg(strstr(err, want), "%s", err);
    const char *mach[] = {"cost",      "--model", "gpt2", "--protocol", "semi2k",
                          "--network", "lan",     "--kv", "8",          NULL};
    ck_assert_int_ne(run_in(th_bin(), td.dir, data, mach), 0);
    err = th_text(tpath("err.txt"));
    ck_assert_msg(strstr(err, want), "%s", err);
}
END_TEST

Suite *datadir_suite(void)
{
    Suite *s = suite_create("datadir");
    TCase *t = th_case(s, "datadir", 30);
    TESTDIR_USE(t);
    TH_TESTS(t, test_build_tree_from_elsewhere, test_installed_layout,
             test_not_found_names_mpcsim_data);
    return s;
}

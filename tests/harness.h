/* harness.h — what the Check suites share: the binary under test and the data directory (a
 * suite run without them FAILS, it does not skip), running the CLI, reading and writing files.
 * Temporary folders that are always removed: testdir.h. */
#ifndef MPCSIM_HARNESS_H
#define MPCSIM_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#include "testdir.h"

/* The number of rows of a case table (an array), as tcase_add_loop_test's end. */
#define TH_N(table) ((int)(sizeof(table) / sizeof *(table)))

/* The least timeout of a test, in seconds. The slowest test of a case that sets none took 27 s
 * in a whole make check on 2 cores under a load average of 15 (CK_XML_LOG_FILE_NAME writes each
 * test's time); the floor leaves twice that. */
#define TH_TIMEOUT_FLOOR 60
/* A test case named name in s (added to it now), timeout seconds per test (at least
 * TH_TIMEOUT_FLOOR; 0: the floor), each multiplied by $CK_TIMEOUT_MULTIPLIER. */
TCase *th_case(Suite *s, const char *name, int timeout);
/* Adds the tests listed after tc to it, in order; TH_LOOPS: each a loop test over _i in
 * [0, n). */
#define TH_TESTS(tc, ...) th_add_tests((tc), -1, (const TTest *const[]){__VA_ARGS__, NULL})
#define TH_LOOPS(tc, n, ...) th_add_tests((tc), (n), (const TTest *const[]){__VA_ARGS__, NULL})
/* tests[] up to a NULL; loops < 0: plain tests. */
void th_add_tests(TCase *tc, int loops, const TTest *const *tests);

/* A row of a bad-input case table: the input, where its message starts (after the file's path,
 * e.g. ":3:1: error: "), a phrase the message must hold and another one (NULL: none). */
typedef struct th_bad {
    const char *text;
    const char *where;
    const char *gist, *gist2;
} th_bad;
/* msg, case i's message, starts with path + c->where and holds both gists; fails the calling
 * test otherwise. */
void th_bad_msg(const char *path, const th_bad *c, const char *msg, int i);

/* $MPCSIM_BIN (make check sets it); fails the calling test when unset or not executable. */
const char *th_bin(void);
/* $MPCSIM_DATA (make check sets it); fails the calling test when unset. */
const char *th_data(void);

/* Runs `mpcsim ARGS` through the shell (ARGS as written, quoted as a shell would need), its
 * stdout and stderr to out_path; returns the exit status (-1: killed). */
int th_cli(const char *args, const char *out_path);
/* The same with stdout and stderr captured into out (cap bytes, NUL-terminated). */
int th_cli_capture(const char *args, char *out, size_t cap);
/* Runs `mpcsim ARGS`, ARGS formatted from fmt as printf does, its stdout and stderr captured
 * into out (cap bytes); fails the calling test unless it exits with status and, want not NULL,
 * the output contains want (the message shows the output). */
void th_cli_expect(char *out, size_t cap, int status, const char *want, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Starts exe with args (NULL-terminated, after the program name) in cwd (NULL: here), stdout
 * and stderr to the files out and err (NULL: err to out; both NULL: inherited). */
pid_t th_spawn(const char *exe, const char *const *args, const char *cwd, const char *out,
               const char *err);
/* Waits for pid: its exit status, or 128 + the signal that killed it. */
int th_wait(pid_t pid);
/* Starts `mpcsim ARG…` (the arguments after err, ending with a NULL) in cwd (NULL: here),
 * stdout to out, stderr to err (NULL: to out). */
pid_t th_spawnl(const char *cwd, const char *out, const char *err, ...);
/* The same, waited for: its exit status; fails the calling test when a signal killed it. */
int th_runl(const char *cwd, const char *out, const char *err, ...);
/* Runs `mpcsim ARGS…` (args NULL-terminated, after the program name) in cwd (NULL: here),
 * stdout to out and stderr to err (NULL: to out); th_wait's status. */
int th_run(const char *cwd, const char *out, const char *err, const char *const *args);
/* A command line as a case-table row: mpcsim's arguments, NULL after the last. */
typedef const char *th_argv[8];
/* Runs each of the n command lines in cwd (out and err as th_run); fails the calling test,
 * naming the line, unless every one exits with status. */
void th_run_each(const char *cwd, const char *out, const char *err, int status,
                 const th_argv *lines, size_t n);
/* Runs a shell command line; its exit status (-1: killed), stdout and stderr captured into out
 * (cap bytes, NUL-terminated; out NULL: discarded). */
int th_sh(const char *cmd, char *out, size_t cap);

/* The file's bytes, NUL-terminated, malloc'd (len may be NULL); fails the calling test when it
 * cannot be read. */
char *th_slurp(const char *path, size_t *len);
/* The same, owned by the harness: valid until the next th_text call (for a look inside an
 * expression). */
const char *th_text(const char *path);
/* Writes text to path; fails the calling test on an error. */
void th_write(const char *path, const char *text);
/* Writes text to the file name in t's test folder; its path (testdir_path's lifetime). */
const char *th_file(const testdir *t, const char *name, const char *text);
/* Copies the file from to the file to, byte for byte; fails the calling test on an error. */
void th_copy(const char *from, const char *to);
/* path exists and its permission bits are mode (e.g. 0600); fails the calling test otherwise. */
void th_assert_mode(const char *path, unsigned mode);
/* 1 when path exists. */
int th_exists(const char *path);
/* How often needle occurs in text. */
int th_count(const char *text, const char *needle);
/* The count before `what` in "(N what" of out's line starting with `line` (a validate note's
 * "(104 equal, 56 ties …)"); fails the calling test when there is none. */
unsigned th_count_of(const char *out, const char *line, const char *what);
/* A `validate --policy` output whose audit found every one of its n decode masks equal to the
 * policy's select() over the session's own values, exactly or by a tie ("…: yes (E equal, T
 * ties …)", E + T = n), and no failed audit; fails the calling test otherwise. */
void th_own_select(const char *out, unsigned n);
/* N of "N of them chosen by its ops" in a `policy check` output; fails the calling test when
 * there is none. */
unsigned th_chosen(const char *out);
/* The bytes and rounds of a `validate --accuracy --policy` output's "measured online:" line,
 * its times left out, as text into buf; fails the calling test when there is none. */
void th_measured(const char *out, char *buf, size_t cap);
/* The same line's numbers: v = prompt bytes, prompt rounds, decode bytes, decode rounds, and
 * the decode steps into *steps. */
void th_measured_nums(const char *out, unsigned long long v[4], unsigned *steps);
/* <MPCSIM_DATA>/<rel>; the result lives until eight more calls. */
const char *th_data_path(const char *rel);

/* Compiles the C file src into the plug-in <t's folder>/<so> as POLICIES.md's steps do (the
 * public header alone), warnings as errors; fails the calling test otherwise. Its path,
 * malloc'd. */
char *th_plugin_build(const testdir *t, const char *src, const char *so);
/* The source <MPCSIM_DATA>/<rel> with swaps[i][0] replaced by swaps[i][1] (the first
 * occurrence of each; asserted to be there), written to <t's folder>/<name>.c and built into
 * <name>.so by th_plugin_build. Its path, malloc'd. */
char *th_plugin_variant(const testdir *t, const char *rel, const char *name,
                        const char *const (*swaps)[2], size_t n_swaps);
/* The shipped scenarios/plugins/keynorm.c renamed `name` (its policy and its files) with from
 * replaced by to (from NULL: no other change), built by th_plugin_variant. */
char *th_keynorm_variant(const testdir *t, const char *name, const char *from, const char *to);

#endif

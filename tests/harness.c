/* harness.c — the Check suites' shared helpers (harness.h). */
#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *th_bin(void)
{
    const char *b = getenv("MPCSIM_BIN");
    ck_assert_msg(b != NULL && *b, "MPCSIM_BIN is not set (run the tests with make check)");
    ck_assert_msg(access(b, X_OK) == 0, "MPCSIM_BIN=%s is not an executable", b);
    return b;
}

const char *th_data(void)
{
    const char *d = getenv("MPCSIM_DATA");
    ck_assert_msg(d != NULL && *d, "MPCSIM_DATA is not set (run the tests with make check)");
    return d;
}

static int status_of(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

int th_cli(const char *args, const char *out_path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", th_bin(), args, out_path);
    return status_of(system(cmd));
}

int th_cli_capture(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", th_bin(), args);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    char sink[4096]; /* the rest, so the command is not killed by a closed pipe */
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    return status_of(pclose(p));
}

pid_t th_spawn(const char *exe, const char *const *args, const char *cwd, const char *out,
               const char *err)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid)
        return pid;
    const char *argv[64] = {exe};
    for (int i = 0; args[i] && i < 62; i++)
        argv[i + 1] = args[i];
    if (cwd && chdir(cwd))
        _exit(126);
    if (out) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = err ? open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600) : fd;
        if (fd < 0 || fe < 0 || dup2(fd, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
    }
    execv(exe, (char *const *)argv);
    _exit(127);
}

int th_wait(pid_t pid)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *th_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    s[n] = '\0';
    if (len)
        *len = (size_t)n;
    return s;
}

const char *th_text(const char *path)
{
    static char *last;
    free(last);
    last = th_slurp(path, NULL);
    return last;
}

void th_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

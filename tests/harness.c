/* harness.c — the Check suites' shared helpers (harness.h). */
#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void th_bad_msg(const char *path, const th_bad *c, const char *msg, int i)
{
    char want[700];
    snprintf(want, sizeof want, "%s%s", path, c->where);
    ck_assert_msg(!strncmp(msg, want, strlen(want)), "case %d: '%s' does not start with '%s'", i,
                  msg, want);
    ck_assert_msg(strstr(msg, c->gist), "case %d: '%s' lacks '%s'", i, msg, c->gist);
    ck_assert_msg(!c->gist2 || strstr(msg, c->gist2), "case %d: '%s' lacks '%s'", i, msg, c->gist2);
}

TCase *th_case(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    /* Check's own default (4 s) is too short for a test that takes a second alone once the
     * machine is busy: every case gets at least TH_TIMEOUT_FLOOR, scaled as any other timeout
     * by CK_TIMEOUT_MULTIPLIER. */
    tcase_set_timeout(tc, timeout > TH_TIMEOUT_FLOOR ? timeout : TH_TIMEOUT_FLOOR);
    suite_add_tcase(s, tc);
    return tc;
}

void th_add_tests(TCase *tc, int loops, const TTest *const *tests)
{
    for (; *tests; tests++)
        if (loops < 0)
            tcase_add_test(tc, *tests);
        else
            tcase_add_loop_test(tc, *tests, 0, loops);
}

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

int th_sh(const char *cmd, char *out, size_t cap)
{
    char full[8192];
    snprintf(full, sizeof full, "{ %s\n} 2>&1", cmd); /* the whole line's stderr */
    fflush(NULL);
    FILE *p = popen(full, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t n = 0, got;
    char buf[4096]; /* read to the end, so the command is not killed by a closed pipe */
    while ((got = fread(buf, 1, sizeof buf, p)) > 0)
        for (size_t i = 0; i < got && out; i++)
            if (n + 1 < cap)
                out[n++] = buf[i];
    if (out && cap)
        out[n] = '\0';
    return status_of(pclose(p));
}

int th_cli_capture(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", th_bin(), args);
    return th_sh(cmd, out, cap);
}

void th_cli_expect(char *out, size_t cap, int status, const char *want, const char *fmt, ...)
{
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof args, "arguments too long: %s", args);
    int st = th_cli_capture(args, out, cap);
    ck_assert_msg(st == status, "mpcsim %s: exit %d, want %d: %s", args, st, status, out);
    if (want)
        ck_assert_msg(strstr(out, want) != NULL, "mpcsim %s: no '%s' in: %s", args, want, out);
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

int th_run(const char *cwd, const char *out, const char *err, const char *const *args)
{
    return th_wait(th_spawn(th_bin(), args, cwd, out, err));
}

void th_run_each(const char *cwd, const char *out, const char *err, int status,
                 const th_argv *lines, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(lines[i][7] == NULL, "line %zu: more than 7 arguments", i);
        int st = th_run(cwd, out, err, lines[i]);
        char shown[256] = "";
        for (int a = 0; lines[i][a]; a++)
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " %s", lines[i][a]);
        ck_assert_msg(st == status, "mpcsim%s: exit %d, want %d", shown, st, status);
    }
}

static pid_t spawn_va(const char *cwd, const char *out, const char *err, va_list ap)
{
    const char *args[63];
    int n = 0;
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert_msg(n < 62, "more than 62 arguments");
        args[n++] = a;
    }
    args[n] = NULL;
    return th_spawn(th_bin(), args, cwd, out, err);
}

pid_t th_spawnl(const char *cwd, const char *out, const char *err, ...)
{
    va_list ap;
    va_start(ap, err);
    pid_t pid = spawn_va(cwd, out, err, ap);
    va_end(ap);
    return pid;
}

int th_runl(const char *cwd, const char *out, const char *err, ...)
{
    va_list ap;
    va_start(ap, err);
    pid_t pid = spawn_va(cwd, out, err, ap);
    va_end(ap);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "mpcsim died by signal %d", WTERMSIG(st));
    return WEXITSTATUS(st);
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

const char *th_file(const testdir *t, const char *name, const char *text)
{
    const char *p = testdir_path(t, name);
    th_write(p, text);
    return p;
}

void th_copy(const char *from, const char *to)
{
    size_t n;
    char *s = th_slurp(from, &n);
    FILE *g = fopen(to, "wb");
    ck_assert_msg(g != NULL, "cannot write %s", to);
    ck_assert_uint_eq(fwrite(s, 1, n, g), n);
    ck_assert_int_eq(fclose(g), 0);
    free(s);
}

void th_assert_mode(const char *path, unsigned mode)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "%s does not exist", path);
    ck_assert_msg((st.st_mode & 0777) == mode, "%s has mode %03o, not %03o", path,
                  (unsigned)(st.st_mode & 0777), mode);
}

int th_exists(const char *path) { return access(path, F_OK) == 0; }

int th_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

unsigned th_count_of(const char *out, const char *line, const char *what)
{
    const char *l = strstr(out, line);
    ck_assert_msg(l, "no line '%s' in:\n%s", line, out);
    char pat[64];
    snprintf(pat, sizeof pat, " %s", what);
    const char *w = strchr(l, '(');
    w = w ? strstr(w, pat) : NULL;
    ck_assert_msg(w && w > l, "no '%s' in:\n%s", what, l);
    while (w > l && w[-1] >= '0' && w[-1] <= '9')
        w--;
    return (unsigned)strtoul(w, NULL, 10);
}

void th_own_select(const char *out, unsigned n)
{
    ck_assert_msg(strstr(out, "equal to its select() over the session's own keys and values: yes "),
                  "%s", out);
    unsigned eq = th_count_of(out, "#       equal to its select()", "equal"),
             ties = th_count_of(out, "#       equal to its select()", "ties");
    ck_assert_msg(eq + ties == n, "%u equal and %u ties of %u masks:\n%s", eq, ties, n, out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
}

unsigned th_chosen(const char *out)
{
    const char *w = strstr(out, " of them");
    ck_assert_msg(w, "%s", out);
    while (w > out && w[-1] >= '0' && w[-1] <= '9')
        w--;
    return (unsigned)strtoul(w, NULL, 10);
}

void th_measured_nums(const char *out, unsigned long long v[4], unsigned *steps)
{
    const char *m = strstr(out, "measured online: ");
    ck_assert_msg(m, "%s", out);
    double sec;
    ck_assert_int_eq(sscanf(m,
                            "measured online: prompt %llu bytes, %llu rounds, %lf s; %u decode "
                            "steps %llu bytes, %llu rounds",
                            &v[0], &v[1], &sec, steps, &v[2], &v[3]),
                     6);
}

void th_measured(const char *out, char *buf, size_t cap)
{
    unsigned long long v[4];
    unsigned ns;
    th_measured_nums(out, v, &ns);
    snprintf(buf, cap, "prompt %llu B %llu rounds, %u steps %llu B %llu rounds", v[0], v[1], ns,
             v[2], v[3]);
}

const char *th_data_path(const char *rel)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", th_data(), rel);
    return buf[k];
}

char *th_plugin_build(const testdir *t, const char *src, const char *so)
{
    char out[4096], cmd[4096];
    char *path = strdup(testdir_path(t, so));
    ck_assert_ptr_nonnull(path);
    snprintf(cmd, sizeof cmd,
             "${CC:-cc} -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror -fPIC -shared "
             "-I'%s/include' '%s' -o '%s' -lm",
             th_data(), src, path);
    int rc = th_sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "%s\n%s", cmd, out);
    return path;
}

char *th_plugin_variant(const testdir *t, const char *rel, const char *name,
                        const char *const (*swaps)[2], size_t n_swaps)
{
    const char *orig = th_text(th_data_path(rel));
    size_t cap = strlen(orig) + 1;
    for (size_t i = 0; i < n_swaps; i++)
        cap += strlen(swaps[i][1]);
    char *src = malloc(cap);
    ck_assert_ptr_nonnull(src);
    memcpy(src, orig, strlen(orig) + 1);
    for (size_t i = 0; i < n_swaps; i++) {
        char *at = strstr(src, swaps[i][0]);
        ck_assert_msg(at, "%s no longer has: %s", rel, swaps[i][0]);
        size_t fl = strlen(swaps[i][0]), tl = strlen(swaps[i][1]);
        memmove(at + tl, at + fl, strlen(at + fl) + 1);
        memcpy(at, swaps[i][1], tl);
    }
    char c[128], so[128];
    snprintf(c, sizeof c, "%s.c", name);
    snprintf(so, sizeof so, "%s.so", name);
    char *cpath = strdup(th_file(t, c, src));
    free(src);
    char *r = th_plugin_build(t, cpath, so);
    free(cpath);
    return r;
}

char *th_keynorm_variant(const testdir *t, const char *name, const char *from, const char *to)
{
    char nm[96];
    snprintf(nm, sizeof nm, ".name = \"%s\"", name);
    const char *const swaps[2][2] = {{".name = \"keynorm\"", nm}, {from, to}};
    return th_plugin_variant(t, "scenarios/plugins/keynorm.c", name, swaps, from ? 2 : 1);
}

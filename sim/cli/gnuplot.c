/* gnuplot.c — running gnuplot (gnuplot.h). */
#include "gnuplot.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int gnuplot_run(const char *expr, const char *const *files, int n, const char *errlog)
{
    char *argv[10] = {"gnuplot"};
    int k = 1;
    if (expr) {
        argv[k++] = "-e";
        argv[k++] = (char *)expr;
    }
    for (int i = 0; i < n && i < 6; i++)
        argv[k++] = (char *)files[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (errlog && !freopen(errlog, "w", stderr))
            _exit(127);
        execvp("gnuplot", argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Double-quoted gnuplot strings. gnuplot runs `cmd` as a shell command even inside double
 * quotes unless the backquote is escaped, so ` is escaped like " and \; a line break is
 * written as \n (a raw one would end the command). Single quotes do not serve: gnuplot 5.4
 * misreads a '' escape at the start of a single-quoted string. */
static int gp_char(char *out, char c)
{
    if (c == '"' || c == '\\' || c == '`') {
        out[0] = '\\';
        out[1] = c;
        return 2;
    }
    if (c == '\n' || c == '\r') {
        out[0] = '\\';
        out[1] = 'n';
        return 2;
    }
    out[0] = c;
    return 1;
}

static size_t gp_quoted(char *out, const char *s)
{
    size_t k = 0;
    out[k++] = '"';
    for (; *s; s++)
        k += (size_t)gp_char(out + k, *s);
    out[k++] = '"';
    return k;
}

void gnuplot_str(FILE *f, const char *s)
{
    char c[2];
    fputc('"', f);
    for (; *s; s++)
        fwrite(c, 1, (size_t)gp_char(c, *s), f);
    fputc('"', f);
}

void gnuplot_var_line(FILE *f, const char *name, const char *value)
{
    fprintf(f, "%s = ", name);
    gnuplot_str(f, value);
    fputc('\n', f);
}

int gnuplot_var(char *buf, size_t n, const char *name, const char *value)
{
    /* name = "..."; appended whole or not at all, buf stays terminated */
    size_t k = strlen(buf), need = strlen(name) + 3 + 2 * strlen(value) + 2 + 2;
    if (k >= n || need >= n - k)
        return -1;
    k += (size_t)snprintf(buf + k, n - k, "%s = ", name);
    k += gp_quoted(buf + k, value);
    memcpy(buf + k, "; ", 3);
    return 0;
}

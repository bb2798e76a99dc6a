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

void gnuplot_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void gnuplot_var(char *buf, size_t n, const char *name, const char *value)
{
    size_t k = strlen(buf);
    k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s = \"", name);
    for (; *value && k + 4 < n; value++) {
        if (*value == '"' || *value == '\\')
            buf[k++] = '\\';
        buf[k++] = *value;
    }
    if (k + 4 < n) {
        memcpy(buf + k, "\"; ", 4);
    }
}

/* cli.c — helpers shared by the subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd.h"
#include "protocols/base/err.h"

const char *cli_prog(void) { return "mpcsim"; }

void cli_error(const char *cmd, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* library messages may already begin with "error: " */
    const char *m = strncmp(msg, "error: ", 7) ? msg : msg + 7;
    fprintf(stderr, "mpcsim %s: error: %s\n", cmd, m);
}

int cli_fail(const char *cmd, int rc, const char *msg)
{
    fprintf(stderr, "mpcsim %s: %s%s\n", cmd, strstr(msg, "error:") ? "" : "error: ", msg);
    return ms_err_exit_code(rc);
}

int cli_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

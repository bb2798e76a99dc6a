/* cli.c — helpers shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>

#include "cmd.h"

const char *cli_prog(void) { return "mpcsim"; }

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mpcsim %s: error: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

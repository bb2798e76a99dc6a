/* cmd_pending.c — weak fallbacks for subcommands whose module is not linked in. */
#include <stdio.h>

#include "cmd.h"

#define PENDING(fn, name)                                                                    \
    __attribute__((weak)) int fn(int argc, char **argv)                                      \
    {                                                                                        \
        (void)argc;                                                                          \
        (void)argv;                                                                          \
        fprintf(stderr, "mpcsim %s: error: this build has no '%s' command\n", name, name);   \
        return 2;                                                                            \
    }

PENDING(cmd_run, "run")
PENDING(cmd_list, "list")
PENDING(cmd_report, "report")
PENDING(cmd_plot, "plot")
PENDING(cmd_merge, "merge")
PENDING(cmd_cost, "cost")
PENDING(cmd_calibrate, "calibrate")
PENDING(cmd_trace, "trace")
PENDING(cmd_party, "party")
PENDING(cmd_validate, "validate")
PENDING(cmd_serve, "serve")

/* cmd.h — the subcommands of the mpcsim CLI. Each parses its options through its table (opt.h),
 * which also prints its --help, and returns the process exit status:
 *   0 success, 1 runtime failure, 2 bad usage or bad input, 3 peer/network failure. */
#ifndef MPCSIM_CMD_H
#define MPCSIM_CMD_H

#include <stddef.h>

int cmd_run(int argc, char **argv);       /* sim/cli/cmd_run.c */
int cmd_list(int argc, char **argv);      /* sim/cli/cmd_list.c */
int cmd_report(int argc, char **argv);    /* sim/cli/cmd_report.c */
int cmd_plot(int argc, char **argv);      /* sim/cli/cmd_plot.c */
int cmd_merge(int argc, char **argv);     /* sim/cli/cmd_merge.c */
int cmd_cost(int argc, char **argv);      /* sim/cli/cmd_cost.c */
int cmd_calibrate(int argc, char **argv); /* sim/cli/cmd_calibrate.c */
int cmd_breakeven(int argc, char **argv); /* sim/cli/cmd_breakeven.c */
int cmd_trace(int argc, char **argv);     /* sim/cli/cmd_trace.c */
int cmd_party(int argc, char **argv);     /* sim/cli/cmd_party.c */
int cmd_validate(int argc, char **argv);  /* sim/cli/cmd_validate.c */
int cmd_serve(int argc, char **argv);     /* sim/cli/cmd_serve.c */
int cmd_policy(int argc, char **argv);    /* sim/cli/cmd_policy.c */

/* Shared CLI helpers (sim/cli/cli.c). */
const char *cli_prog(void); /* "mpcsim" */
/* Prints "mpcsim <cmd>: error: …" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A library error for cmd: "mpcsim <cmd>: error: msg" to stderr, or "mpcsim <cmd>: msg" when
 * msg is located and carries its own ("file:line:col: error: …"); returns the exit status of
 * the error code rc (ms_err_exit_code). */
int cli_fail(const char *cmd, int rc, const char *msg);
/* mkdir -p: path and its missing parents (0777 before the umask); -1 (errno set) on failure. */
int cli_mkdir_p(const char *path);

#endif

/* main.c — the mpcsim command line: a table of subcommands. */
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "cmd.h"
#include "results/rdb.h"
#include "sim/scenario/runlabel.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run a scenario sweep and record every run in SQLite"},
    {"cost", cmd_cost, "cost one model/protocol/network/KV point without a scenario"},
    {"list", cmd_list, "list models, protocols (--costs), policies or networks"},
    {"report", cmd_report, "print a results database as a table"},
    {"plot", cmd_plot, "plot a results database with gnuplot"},
    {"merge", cmd_merge, "fold shard databases into one"},
    {"breakeven", cmd_breakeven,
     "where a policy beats the full cache: bandwidth x latency x threads"},
    {"calibrate", cmd_calibrate, "measure this machine's compute rates into a profile"},
    {"trace", cmd_trace, "record, synthesize, fit or inspect attention traces"},
    {"validate", cmd_validate, "run the real MPC backend and compare with the simulator"},
    {"party", cmd_party, "run one party (or the dealer) of the real MPC backend"},
    {"serve", cmd_serve, "simulate multi-user serving with cross-user KV sharing"},
    {"policy", cmd_policy, "check that a policy's MPC cost computes its selection"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: mpcsim <command> [options]   (mpcsim <command> --help)\n\n"
               "Predicts what an LLM under a KV-cache policy costs in secure 2PC/3PC inference,\n"
               "and what the policy does to the model's output.\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions:\n  -h, --help     this help\n  -V, --version  print the version\n");
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    rdb_set_labeler(run_labels_from_yaml); /* an older database's runs get their labels */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("mpcsim %s\n", MPCSIM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "mpcsim: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

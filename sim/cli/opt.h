/* opt.h — the subcommands' options as one table each: a row {long name, short name, argument
 * kind, destination, help} both parses argv (getopt_long underneath: long options, bundled
 * short ones, options after positional arguments) with every value checked against its kind and
 * range, and prints the options part of --help, so the two cannot drift apart.
 *
 * Messages (MS_ERR_USAGE, in the errbuf; the command prints them as its errors): "option '--x'
 * needs a value", "unknown option '--x' (see mpcsim CMD --help)"
 * (with "did you mean '--y'? " before "see" when a long name is near), "unexpected argument 'x'",
 * "--x wants WANT, not 'v'" (numbers), "--x is a, b or c, not 'v'" (choices). */
#ifndef MPCSIM_OPT_H
#define MPCSIM_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/base/err.h"

typedef enum cli_kind {
    CLI_FLAG,   /* no argument: *(int *)dest = 1 */
    CLI_STR,    /* *(const char **)dest = the argument */
    CLI_U32,    /* *(uint32_t *)dest, an integer in [lo, hi] */
    CLI_INT,    /* *(int *)dest, an integer in [lo, hi] */
    CLI_U64,    /* *(unsigned long long *)dest, an integer in [lo, hi] (hi 0: up to 2^64-1) */
    CLI_F64,    /* *(double *)dest, a number in [lo, hi] */
    CLI_CHOICE, /* *(int *)dest = the argument's index among choices "a|b|c" */
    CLI_LIST,   /* appended to the cli_list dest (repeatable) */
    CLI_FN,     /* fn checks and stores the argument */
    CLI_HELP,   /* -h, --help: cli_parse returns CLI_HELP_ASKED */
} cli_kind;

typedef struct cli_opt cli_opt;
struct cli_opt {
    const char *name; /* long name, without "--" */
    char short_name;  /* 0: none */
    cli_kind kind;
    void *dest;
    const char *arg;     /* the argument's name in --help ("M"); NULL for a flag */
    const char *help;    /* --help text; each '\n' continues at the text column */
    double lo, hi;       /* numbers: the accepted range (U32, INT: hi 0 means the type's max) */
    const char *want;    /* numbers: the message's "wants …" (NULL: from lo and hi) */
    const char *choices; /* CLI_CHOICE: "a|b|c" */
    int *seen;           /* optional: set to 1 when given */
    int (*fn)(const cli_opt *o, const char *arg, errbuf *e); /* CLI_FN */
};

/* A repeatable option's values (CLI_LIST): at most max, in order. */
typedef struct cli_list {
    const char **v;
    int n, max;
} cli_list;

/* A command's table. */
typedef struct cli_cmd {
    const char *name; /* "cost": for messages */
    const cli_opt *opts;
    size_t n_opts;
    int col;     /* --help: the column the help text starts at */
    int max_pos; /* positional arguments accepted */
} cli_cmd;

#define CLI_HELP_ASKED 1

/* Parses argv[1..argc): MS_OK with the positional arguments in pos[0..*n_pos) (pos may be NULL
 * when max_pos is 0), CLI_HELP_ASKED for -h/--help (the command prints its usage), or
 * MS_ERR_USAGE with the message in e. Destinations keep their values unless given. */
int cli_parse(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos, errbuf *e);
/* cli_parse for a command: prints usage(stdout) on --help (returns CLI_HELP_ASKED), an error
 * as "mpcsim NAME: error: …" (returns 2, the usage exit status), else returns 0. */
int cli_parse_cmd(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos,
                  void (*usage)(FILE *f, const cli_cmd *c));
/* For a command of one positional argument: 0 when n_pos is 1; else prints none (n_pos 0) or
 * many as the command's error and its usage to stderr, and returns 2. */
int cli_want_one(const cli_cmd *c, int n_pos, const char *none, const char *many,
                 void (*usage)(FILE *f, const cli_cmd *c));
/* cli_parse_cmd, then cli_want_one: *arg = the one positional argument (c->max_pos >= 2, so
 * that a second one is told as such). 0, CLI_HELP_ASKED or 2. */
int cli_parse_one(const cli_cmd *c, int argc, char **argv, const char **arg, const char *none,
                  const char *many, void (*usage)(FILE *f, const cli_cmd *c));
/* Prints one line per option (and its continuation lines), in the table's order. */
void cli_help(const cli_cmd *c, FILE *f);

#endif

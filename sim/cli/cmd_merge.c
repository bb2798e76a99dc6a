/* cmd_merge.c — `mpcsim merge`: fold shard databases into one, without duplicates (runs are
 * keyed by config hash), in one transaction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opt.h"
#include "results/rdb.h"

static int merge(const char *out, const char *const *in, size_t n_in, int quiet)
{
    for (size_t i = 0; i < n_in; i++)
        if (!strcmp(in[i], out)) {
            cli_error("merge", "%s is both the output and an input", out);
            return 2;
        }
    errbuf e;
    int rc;
    for (size_t i = 0; i < n_in; i++) /* check inputs before creating the output */
        if ((rc = rdb_merge_check(in[i], &e))) {
            cli_error("merge", "%s", e.msg);
            return ms_err_exit_code(rc);
        }
    rdb *db;
    if ((rc = rdb_open(out, 1, &db, &e))) {
        cli_error("merge", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    size_t added = 0, skipped = 0;
    rc = rdb_merge(db, in, n_in, &added, &skipped, &e);
    if (rc)
        cli_error("merge", "%s", e.msg);
    else if (!quiet)
        printf("%s: %zu run%s added, %zu already there, from %zu database%s\n", out, added,
               added == 1 ? "" : "s", skipped, n_in, n_in == 1 ? "" : "s");
    if (rdb_close(db) && !rc)
        rc = MS_ERR_DB;
    return rc ? ms_err_exit_code(rc) : 0;
}

static void merge_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim merge OUT.db IN.db...\n\n"
               "Folds the runs of each IN.db (e.g. the shards of `mpcsim run --shard K/N`) into\n"
               "OUT.db, created if missing. A run whose config hash OUT.db already holds is\n"
               "skipped (an ok run replaces a failed one). Everything is one transaction: on any\n"
               "error OUT.db is left as it was. Every input must have this mpcsim's schema\n"
               "version.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(
        f,
        "\nexit status: 0 ok, 1 database error, 2 bad usage, missing input or schema\nmismatch\n");
}

int cmd_merge(int argc, char **argv)
{
    int quiet = 0;
    const cli_opt opts[] = {
        {.name = "quiet",
         .short_name = 'q',
         .kind = CLI_FLAG,
         .dest = &quiet,
         .help = "no summary line"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"merge", opts, sizeof opts / sizeof opts[0], 16, argc};
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_pos = 0, rc = pos ? cli_parse_cmd(&cmd, argc, argv, pos, &n_pos, merge_usage) : 1;
    if (rc == 0 && n_pos < 2) {
        cli_error("merge", "want an output database and at least one input");
        merge_usage(stderr, &cmd);
        rc = 2;
    }
    if (rc == 0)
        rc = merge(pos[0], pos + 1, (size_t)n_pos - 1, quiet);
    free(pos);
    return rc == CLI_HELP_ASKED ? 0 : rc;
}

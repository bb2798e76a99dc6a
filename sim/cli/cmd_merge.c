/* cmd_merge.c — `mpcsim merge`: fold shard databases into one, without duplicates (runs are
 * keyed by config hash), in one transaction. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "results/rdb.h"

static void merge_usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim merge OUT.db IN.db...\n\n"
            "Folds the runs of each IN.db (e.g. the shards of `mpcsim run --shard K/N`) into\n"
            "OUT.db, created if missing. A run whose config hash OUT.db already holds is\n"
            "skipped (an ok run replaces a failed one). Everything is one transaction: on any\n"
            "error OUT.db is left as it was. Every input must have this mpcsim's schema\n"
            "version.\n\n"
            "options:\n"
            "  -q, --quiet   no summary line\n"
            "  -h, --help    this help\n\n"
            "exit status: 0 ok, 1 database error, 2 bad usage, missing input or schema mismatch\n");
}

int cmd_merge(int argc, char **argv)
{
    static const struct option lo[] = {{"quiet", no_argument, NULL, 'q'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
        switch (c) {
        case 'q': quiet = 1; break;
        case 'h': merge_usage(stdout); return 0;
        default: merge_usage(stderr); return 2;
        }
    }
    if (argc - optind < 2) {
        cli_error("merge", "want an output database and at least one input");
        merge_usage(stderr);
        return 2;
    }
    const char *out = argv[optind];
    for (int i = optind + 1; i < argc; i++)
        if (!strcmp(argv[i], out)) {
            cli_error("merge", "%s is both the output and an input", out);
            return 2;
        }
    errbuf e;
    int rc;
    for (int i = optind + 1; i < argc; i++) /* check inputs before creating the output */
        if ((rc = rdb_merge_check(argv[i], &e))) {
            cli_error("merge", "%s", e.msg);
            return ms_err_exit_code(rc);
        }
    rdb *db;
    if ((rc = rdb_open(out, 1, &db, &e))) {
        cli_error("merge", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    size_t added = 0, skipped = 0;
    rc = rdb_merge(db, (const char *const *)argv + optind + 1, (size_t)(argc - optind - 1),
                   &added, &skipped, &e);
    if (rc)
        cli_error("merge", "%s", e.msg);
    else if (!quiet)
        printf("%s: %zu run%s added, %zu already there, from %d database%s\n", out, added,
               added == 1 ? "" : "s", skipped, argc - optind - 1, argc - optind - 1 == 1 ? "" : "s");
    if (rdb_close(db) && !rc)
        rc = MS_ERR_DB;
    return rc ? ms_err_exit_code(rc) : 0;
}

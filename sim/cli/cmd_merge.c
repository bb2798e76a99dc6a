/* cmd_merge.c — `mpcsim merge`: fold shard databases into one, without duplicates (runs are
 * keyed by config hash), in one transaction. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "opt.h"
#include "results/rdb.h"

/* The temporary file and its SQLite side files, removed by the handler of a signal that ends
 * the merge (SIGINT, SIGTERM, SIGHUP) before the default action: only unlink, which is
 * async-signal-safe, on paths made before the handler was installed. */
static char merge_tmp[4][4096];
static const char *const merge_side[] = {"", "-wal", "-shm", "-journal"};
static const int merge_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void merge_on_signal(int sig)
{
    for (int i = 0; i < 4; i++)
        if (merge_tmp[i][0])
            unlink(merge_tmp[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* with_tmp: tmp's paths set and the handlers installed; else the default actions back. */
static void merge_guard(const char *tmp, struct sigaction old[3])
{
    if (tmp) {
        for (int i = 0; i < 4; i++)
            snprintf(merge_tmp[i], sizeof merge_tmp[i], "%s%s", tmp, merge_side[i]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = merge_on_signal;
        sigfillset(&sa.sa_mask);
        for (int i = 0; i < 3; i++)
            sigaction(merge_signals[i], &sa, &old[i]);
    } else {
        for (int i = 0; i < 3; i++)
            sigaction(merge_signals[i], &old[i], NULL);
        for (int i = 0; i < 4; i++)
            merge_tmp[i][0] = 0;
    }
}

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
    /* The merge goes into a temporary copy of OUT in OUT's folder, renamed over OUT only when
     * it succeeded: a failure (or a kill) never leaves OUT half-written. */
    size_t ol = strlen(out);
    char *tmp = malloc(ol + 16);
    if (!tmp) {
        cli_error("merge", "out of memory");
        return 1;
    }
    snprintf(tmp, ol + 16, "%s.mergeXXXXXX", out);
    /* signals blocked while the file is made and the handlers go in, so none ends the merge
     * between the two and leaves the file */
    sigset_t block, prev;
    sigemptyset(&block);
    for (int i = 0; i < 3; i++)
        sigaddset(&block, merge_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &prev);
    struct sigaction old[3];
    int fd = ol + 16 <= sizeof merge_tmp[0] - 16 ? mkstemp(tmp) : (errno = ENAMETOOLONG, -1);
    if (fd >= 0)
        merge_guard(tmp, old);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    if (fd < 0) {
        cli_error("merge", "%s: cannot create a temporary file beside it: %s", out,
                  strerror(errno));
        free(tmp);
        return 1;
    }
    struct stat st;
    int exists = stat(out, &st) == 0;
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~um); /* the mode OUT has or would get */
    close(fd);
    rc = MS_OK;
    if (exists && (rc = rdb_copy(out, tmp, &e)))
        cli_error("merge", "%s", e.msg);
    rdb *db = NULL;
    if (!rc && (rc = rdb_open(tmp, 1, &db, &e)))
        cli_error("merge", "%s", e.msg);
    size_t added = 0, skipped = 0;
    if (!rc && (rc = rdb_merge(db, in, n_in, &added, &skipped, &e)))
        cli_error("merge", "%s", e.msg);
    if (rdb_close(db) && !rc) {
        cli_error("merge", "%s: closing the merged database failed", out);
        rc = MS_ERR_DB;
    }
    if (!rc && rename(tmp, out) != 0) {
        cli_error("merge", "%s: cannot replace it: %s", out, strerror(errno));
        rc = MS_ERR_IO;
    }
    sigprocmask(SIG_BLOCK, &block, NULL);
    if (rc)
        for (int i = 0; i < 4; i++)
            unlink(merge_tmp[i]);
    merge_guard(NULL, old);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    if (!rc && !quiet)
        printf("%s: %zu run%s added, %zu already there, from %zu database%s\n", out, added,
               added == 1 ? "" : "s", skipped, n_in, n_in == 1 ? "" : "s");
    free(tmp);
    return rc ? ms_err_exit_code(rc) : 0;
}

static void merge_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim merge OUT.db IN.db...\n\n"
               "Folds the runs of each IN.db (e.g. the shards of `mpcsim run --shard K/N`) into\n"
               "OUT.db, created if missing. A run whose config hash OUT.db already holds is\n"
               "skipped (an ok run replaces a failed one). The merge is written to a temporary\n"
               "file beside OUT.db and renamed over it on success: on any error OUT.db is left\n"
               "as it was and the exit status is non-zero. Every input must have this\n"
               "mpcsim's schema version.\n\n"
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
    if (rc == CLI_HELP_ASKED) {
        free(pos);
        return 0;
    }
    if (rc == 0 && n_pos < 2) {
        cli_error("merge", "want an output database and at least one input");
        merge_usage(stderr, &cmd);
        rc = 2;
    }
    if (rc == 0)
        rc = merge(pos[0], pos + 1, (size_t)n_pos - 1, quiet);
    free(pos);
    return rc;
}

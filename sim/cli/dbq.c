/* dbq.c — --where filters, human units and the output width for `report` and `plot`. */
#include "dbq.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd.h"
#include "protocols/base/err.h"

static const char *const run_columns[] = {
    "model",      "protocol",   "protocol_label", "network",    "policy",         "policy_label",
    "prompt_len", "decode_len", "batch",          "latency_ms", "bandwidth_mbps", "machine",
    "threads",    "scenario",   "status",         "seed",       "grid_index",     "config_hash"};
#define N_RUN_COLUMNS (sizeof run_columns / sizeof run_columns[0])

static int is_column(const char *k)
{
    for (size_t i = 0; i < N_RUN_COLUMNS; i++)
        if (!strcmp(run_columns[i], k))
            return 1;
    return 0;
}

/* A config path: letters, digits, '_', '-', '.', and [N] indices, below a top-level key (or
 * the top-level scalar overlap); a bare word that is no column is a typo, not a path. */
static int is_path(const char *k)
{
    return k[0] &&
           strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.[]") ==
               strlen(k) &&
           (strpbrk(k, ".[") || !strcmp(k, "overlap"));
}

int dbq_where(const char *cmd, const char *const *args, int n, char **out)
{
    char *sql = sqlite3_mprintf("%s", "");
    for (int i = 0; i < n && sql; i++) {
        char key[128];
        const char *eq = strchr(args[i], '=');
        if (!eq || eq == args[i] || (size_t)(eq - args[i]) >= sizeof key) {
            cli_error(cmd,
                      "--where wants KEY=VALUE (e.g. network=wan, policy_label=full), not "
                      "'%s'",
                      args[i]);
            sqlite3_free(sql);
            return 2;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - args[i]), args[i]);
        char *lhs;
        if (is_column(key))
            lhs = sqlite3_mprintf("r.%s", key);
        else if (is_path(key))
            lhs = sqlite3_mprintf("json_extract(r.config_json, '$.%q')", key);
        else {
            const char *dym = did_you_mean(key, run_columns, N_RUN_COLUMNS);
            cli_error(cmd, "--where: '%s' is neither a runs column nor a config path%s%s%s", key,
                      dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
            sqlite3_free(sql);
            return 2;
        }
        /* VALUE[,VALUE…]: any of them */
        char *vals = strdup(eq + 1), *save = NULL, *list = sqlite3_mprintf("%s", "");
        for (char *v = vals ? strtok_r(vals, ",", &save) : NULL; v && list;
             v = strtok_r(NULL, ",", &save)) {
            double d;
            char *nl = parse_double(v, &d)
                           ? sqlite3_mprintf("%s%s%Q", list, list[0] ? "," : "", v)
                           : sqlite3_mprintf("%s%s%.17g", list, list[0] ? "," : "", d);
            sqlite3_free(list);
            list = nl;
        }
        free(vals);
        char *ns = list && lhs
                       ? sqlite3_mprintf("%s AND %s IN (%s)", sql, lhs, list[0] ? list : "NULL")
                       : NULL;
        sqlite3_free(list);
        sqlite3_free(lhs);
        sqlite3_free(sql);
        sql = ns;
    }
    if (!sql) {
        cli_error(cmd, "out of memory");
        return 1;
    }
    *out = strdup(sql);
    sqlite3_free(sql);
    return *out ? 0 : 1;
}

int dbq_open(const char *cmd, const char *path, const char *const *args, int n, char **where,
             rdb **db)
{
    *where = NULL;
    int st = dbq_where(cmd, args, n, where);
    if (st)
        return st;
    errbuf e;
    int rc = rdb_open_ro(path, db, &e);
    if (rc) {
        cli_error(cmd, "%s", e.msg);
        free(*where);
        *where = NULL;
        return ms_err_exit_code(rc);
    }
    return 0;
}

void dbq_seconds(char *out, size_t n, double s)
{
    if (s == 0)
        snprintf(out, n, "0 s");
    else if (s < 0.001)
        snprintf(out, n, "%.3g us", s * 1e6);
    else if (s < 1)
        snprintf(out, n, "%.3g ms", s * 1e3);
    else if (s < 60)
        snprintf(out, n, "%.3g s", s);
    else if (s < 3600)
        snprintf(out, n, "%.3g min", s / 60);
    else if (s < 86400)
        snprintf(out, n, "%.3g h", s / 3600);
    else
        snprintf(out, n, "%.3g d", s / 86400);
}

void dbq_bytes(char *out, size_t n, double b)
{
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 1000 && u < 5) {
        b /= 1000;
        u++;
    }
    snprintf(out, n, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
}

int dbq_columns(int given)
{
    if (given > 0)
        return given;
    if (!isatty(STDOUT_FILENO))
        return 80;
    const char *c = getenv("COLUMNS");
    long long v;
    if (c && !parse_i64(c, &v) && v >= 20 && v <= 1000)
        return (int)v;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 80;
}

/* Prints text wrapped at width, continuation lines indented by two spaces. */
void dbq_wrap(FILE *f, const char *s, int width)
{
    size_t lim = width > 24 ? (size_t)width : 24, first = 1;
    while (*s) {
        size_t room = first ? lim : lim - 2, len = strcspn(s, "\n");
        if (len > room) { /* at the last space that fits; in one long word (a label such
                           * as aby3(trunc=local,topk=quickselect)), after its last comma */
            size_t cut = room;
            while (cut > 0 && s[cut] != ' ')
                cut--;
            if (!cut) {
                cut = room;
                while (cut > 0 && s[cut - 1] != ',')
                    cut--;
            }
            len = cut ? cut : room;
        }
        fprintf(f, "%s%.*s\n", first ? "" : "  ", (int)len, s);
        s += len;
        while (*s == ' ' || *s == '\n')
            s++;
        first = 0;
    }
}

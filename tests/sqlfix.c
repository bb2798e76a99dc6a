/* sqlfix.c — see sqlfix.h. */
#include "sqlfix.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3_stmt *first_row(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    ck_assert_msg(sqlite3_step(s) == SQLITE_ROW, "no row: %s", sql);
    return s;
}

long long sqlfix_int(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *s = first_row(h, sql);
    long long v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

char *sqlfix_text(sqlite3 *h, const char *sql, int col)
{
    sqlite3_stmt *s = first_row(h, sql);
    const unsigned char *t = sqlite3_column_text(s, col);
    char *v = strdup(sqlite3_column_type(s, col) == SQLITE_NULL ? "NULL"
                     : t                                        ? (const char *)t
                                                                : "");
    sqlite3_finalize(s);
    ck_assert_ptr_nonnull(v);
    return v;
}

sqlite3 *sqlfix_open_ro(const char *path)
{
    sqlite3 *h = NULL;
    ck_assert_msg(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK,
                  "cannot open %s", path);
    sqlite3_busy_timeout(h, 5000);
    return h;
}

long long sqlfix_file_int(const char *path, const char *sql)
{
    sqlite3 *h = sqlfix_open_ro(path);
    long long v = sqlfix_int(h, sql);
    sqlite3_close(h);
    return v;
}

char *sqlfix_file_text(const char *path, const char *sql, int col)
{
    sqlite3 *h = sqlfix_open_ro(path);
    char *v = sqlfix_text(h, sql, col);
    sqlite3_close(h);
    return v;
}

void sqlfix_counts(sqlite3 *h, const char *counts)
{
    for (const char *p = counts; *p;) {
        char table[64];
        long long want;
        int used = 0;
        ck_assert_msg(sscanf(p, " %63[^= ]=%lld %n", table, &want, &used) == 2 && used > 0,
                      "bad counts '%s' at '%s'", counts, p);
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
        long long got = sqlfix_int(h, sql);
        ck_assert_msg(got == want, "%s: %lld rows, want %lld", table, got, want);
        p += used;
    }
}

rdb *sqlfix_rdb_new(const char *path)
{
    rdb *db = NULL;
    errbuf e;
    ck_assert_msg(rdb_open(path, 1, &db, &e) == MS_OK, "%s", e.msg);
    return db;
}

/* rdb_bind.c — a row's values bound from one list (rdb_bind.h). */
#include "rdb_bind.h"

int rdb_bind(sqlite3_stmt *s, const rdb_val *v, size_t n)
{
    int rc = SQLITE_OK;
    for (size_t k = 0; k < n && rc == SQLITE_OK; k++) {
        int col = (int)k + 1;
        switch (v[k].kind) {
        case RDB_INT: rc = sqlite3_bind_int64(s, col, (sqlite3_int64)v[k].i); break;
        case RDB_REAL: rc = sqlite3_bind_double(s, col, v[k].d); break;
        case RDB_TEXT:
            rc = v[k].s ? sqlite3_bind_text(s, col, v[k].s, -1, SQLITE_TRANSIENT)
                        : sqlite3_bind_null(s, col);
            break;
        default: rc = sqlite3_bind_null(s, col);
        }
    }
    return rc;
}

int rdb_step_row(sqlite3_stmt *s, const rdb_val *v, size_t n)
{
    int rc = rdb_bind(s, v, n) == SQLITE_OK ? sqlite3_step(s) : SQLITE_ERROR;
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

int rdb_exec_row(sqlite3 *h, const char *sql, const rdb_val *v, size_t n)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    int rc = rdb_step_row(s, v, n) ? -2 : 0;
    sqlite3_finalize(s);
    return rc;
}

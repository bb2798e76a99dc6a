/* rdb_bind.h — a row's values bound to a statement's parameters from one list, for the writers
 * of the results database (rdb.c, serve_db.c): a row is written as the list of its columns in
 * the statement's order, not as a call per column.
 *
 *   const rdb_val v[] = {RV_INT(id), RV_TEXT(m->name), RV_REAL(m->value), RV_TEXT(m->unit)};
 *   if (rdb_step_row(s, v, 4)) …                                                        */
#ifndef MPCSIM_RDB_BIND_H
#define MPCSIM_RDB_BIND_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rdb_val {
    enum { RDB_NULL, RDB_INT, RDB_REAL, RDB_TEXT } kind;
    union {
        int64_t i;
        double d;
        const char *s;
    };
} rdb_val;

#define RV_NULL ((rdb_val){.kind = RDB_NULL})
#define RV_INT(x) ((rdb_val){.kind = RDB_INT, .i = (int64_t)(x)})
#define RV_REAL(x) ((rdb_val){.kind = RDB_REAL, .d = (double)(x)})
#define RV_TEXT(x) ((rdb_val){.kind = RDB_TEXT, .s = (x)}) /* NULL: SQL NULL */
#define RV_N(v) (sizeof(v) / sizeof(v)[0])

/* Binds v[0..n) to parameters 1..n (text copied, so it need not outlive the call):
 * SQLITE_OK or the first error. */
int rdb_bind(sqlite3_stmt *s, const rdb_val *v, size_t n);
/* rdb_bind, then one step that must finish the statement (an INSERT or UPDATE), then reset:
 * 0, or -1 (the error in sqlite3_errmsg of the statement's database). */
int rdb_step_row(sqlite3_stmt *s, const rdb_val *v, size_t n);
/* sql prepared on h, then rdb_step_row, then finalized: 0; -1 when sql does not prepare, -2
 * when the row is not stored (the error in sqlite3_errmsg(h)). */
int rdb_exec_row(sqlite3 *h, const char *sql, const rdb_val *v, size_t n);

#endif

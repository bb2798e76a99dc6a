/* rdb_int.h — what the results database's own files share (not for its callers). */
#ifndef MPCSIM_RDB_INT_H
#define MPCSIM_RDB_INT_H

#include <sqlite3.h>

#include "rdb.h"

struct rdb {
    sqlite3 *h;
    char path[1024];
    sqlite3_stmt *st[32];
};

/* Every database error names the database, what was being done and SQLite's own message. */
#define DB_ERR(db, e, what) \
    err_set(e, MS_ERR_DB, "%s: %s: %s", (db)->path, what, sqlite3_errmsg((db)->h))

/* sql prepared on h into *s: 0, or -1 (SQLite's message is on h). */
int rdb_prep(sqlite3 *h, const char *sql, sqlite3_stmt **s);

/* Migrations 2 → 3 and 3 → 4: columns of stored runs derived from their config_yaml
 * (rdb_config.c). */
int rdb_migrate_labels(rdb *db, errbuf *e);
int rdb_migrate_protocol_labels(rdb *db, errbuf *e);
int rdb_migrate_relabel(rdb *db, errbuf *e);
/* 5 → 6: runs.policy_cost added, '' for every stored run (a database that has the column, an
 * older user_version set on a newer file, keeps it). */
int rdb_migrate_policy_cost(rdb *db, errbuf *e);

#endif

/* rdb.h — the results database (SQLite). Schema in results/SCHEMA.md, versioned with
 * PRAGMA user_version; WAL; one transaction per run, so a killed sweep keeps every finished
 * run and no half one; runs keyed by the hash of their resolved config (resume, merge). */
#ifndef MPCSIM_RDB_H
#define MPCSIM_RDB_H

#include "err.h"

typedef struct rdb rdb;

int rdb_open(const char *path, int create, rdb **out, errbuf *e);
int rdb_close(rdb *db);
const char *rdb_path(const rdb *db);
void *rdb_handle(rdb *db); /* the sqlite3 * */

#endif

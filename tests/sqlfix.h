/* sqlfix.h — one-value SQL look-ups for the suites that read results databases. Every query
 * must prepare and yield a row; otherwise the calling test fails, naming the query. */
#ifndef MPCSIM_TESTS_SQLFIX_H
#define MPCSIM_TESTS_SQLFIX_H

#include <sqlite3.h>

#include "results/rdb.h"

/* Column 0 of the first row of sql, as an integer. */
long long sqlfix_int(sqlite3 *h, const char *sql);
/* Column col of the first row of sql as text ("NULL" for a NULL), malloc'd. */
char *sqlfix_text(sqlite3 *h, const char *sql, int col);
/* The same on the database file path, opened read-only (waiting up to 5 s for a writer). */
long long sqlfix_file_int(const char *path, const char *sql);
char *sqlfix_file_text(const char *path, const char *sql, int col);
/* path opened read-only, waiting up to 5 s for a writer. */
sqlite3 *sqlfix_open_ro(const char *path);

/* Row counts of tables: counts is "table=N table=N …", each a `SELECT count(*) FROM table`
 * that must give N (the failure names the table, the count and N). */
void sqlfix_counts(sqlite3 *h, const char *counts);
/* The results database at path, created when missing (rdb_open's create); fails the calling
 * test with rdb_open's message otherwise. */
rdb *sqlfix_rdb_new(const char *path);

#endif

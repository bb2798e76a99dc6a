/* dbvar.h — what tells apart runs that `report` and `plot` would otherwise show alike.
 *
 * The labels a report row or a plot series is named by (model, protocol and policy with their
 * options, network, machine, the lengths) do not cover every key of a run's configuration: the
 * trace source and its seed, the batch, decode_stride, the run seed, a model's overridden
 * dimensions, the links of two networks that share a name or a slowest link. When two runs
 * with different configurations would look the same, the config keys whose values differ
 * between them are found in config_json and every run shown is given those keys' values
 * ("trace.seed=2,workload.batch=4"): the variant, empty when the labels suffice. */
#ifndef MPCSIM_DBVAR_H
#define MPCSIM_DBVAR_H

#include <sqlite3.h>
#include <stdint.h>

typedef struct dbvar dbvar;

#define DBVAR_OK_ONLY 1 /* only runs with status 'ok' */

/* ident: an SQL expression over `runs r` naming what the output shows of a run (two runs
 * with the same value look alike); family: runs whose variants name the same keys, those
 * that differ within any group of look-alikes among them (a plot's series, so a line keeps
 * one name along x), or NULL: each group of look-alikes alone (a report's rows). where:
 * " AND …" (dbq_where) or "". A key is named by its last part ("mac_per_s=1e9") unless
 * another of the family's keys ends the same. 0, or -1 (SQLite error or out of memory). */
int dbvar_build(sqlite3 *h, const char *ident, const char *family, const char *where, int flags,
                dbvar **out);
/* The run's variant, "" when none (or the run was not among those built). */
const char *dbvar_of(const dbvar *v, int64_t id);
/* Every key that makes a variant (whole paths), ", "-joined ("trace.seed, workload.batch"); "" if
 * none. */
const char *dbvar_keys(const dbvar *v);
/* Registers the SQL function run_variant(id) on h, answering dbvar_of(v, id) (v must
 * outlive the statements that call it). 0, or -1. */
int dbvar_sql(sqlite3 *h, dbvar *v);
void dbvar_free(dbvar *v);

#endif

/* runrow.h — a finished run as a database row: its labels, configuration, status, metrics, and
 * its phases' totals, per-category breakdowns and per-layer figures (results/rdb.h). */
#ifndef MPCSIM_RUNROW_H
#define MPCSIM_RUNROW_H

#include "protocols/base/err.h"
#include "results/rdb.h"
#include "sim/engine/runcfg.h"
#include "sim/scenario/pool.h"

/* Stores run c's result j (a failed run: its error, no figures) in db. *stored (when not NULL)
 * = 0 when another process had stored the run meanwhile (ours is dropped), 1 otherwise. */
int run_row_store(rdb *db, const run_cfg *c, const pool_result *j, int *stored, errbuf *e);

#endif

/* run_figures.h — the figures the scenarios of a sweep declare (`figures:`), drawn after it. */
#ifndef MPCSIM_RUN_FIGURES_H
#define MPCSIM_RUN_FIGURES_H

#include <stddef.h>

#include "sim/scenario/scn.h"

/* Draws every figure of the n scenarios s into DB's plots folder (db without .db, plus
 * -plots) with `mpcsim plot`, from every finished run the database holds. 0, or the exit
 * status of the first figure that failed (after its message). */
int run_figures(const scenario *s, size_t n, const char *db);

#endif

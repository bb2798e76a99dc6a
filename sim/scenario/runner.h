/* runner.h — one run end to end: its result (metrics and per-phase breakdowns) and the
 * functions that execute a run configuration (sim/engine/runcfg.h). */
#ifndef MPCSIM_RUNNER_H
#define MPCSIM_RUNNER_H

#include <stddef.h>

#include "protocols/base/metric.h"
#include "sim/engine/runcfg.h"
#include "sim/engine/simulate.h"

typedef struct run_result {
    run_metric *metric;
    size_t n_metric, cap_metric;
    sim_result phase[PHASE_N]; /* per-phase breakdown (category and layer) */
    double wall_s;             /* time the run took on this machine */
} run_result;

void run_result_init(run_result *r);
void run_result_free(run_result *r);
int run_metric_add(run_result *r, const char *name, double value, const char *unit);
/* A sink that appends to r (run_metric_add). */
metric_sink run_result_sink(run_result *r);

/* Executes one run: replay the trace under the policy, lower each step, cost it, simulate it;
 * fills res with metrics and breakdowns. */
int run_execute(const run_cfg *cfg, run_result *res, errbuf *e);

/* The run's last decode step (its policy replayed through every step before it), lowered and
 * costed: prog and log (initialized by the caller; their old contents are freed) receive the
 * op program and its cost log, ready for sim_run on any network and machine. */
int run_decode_program(const run_cfg *cfg, op_program *prog, cost_log *log, errbuf *e);

#endif

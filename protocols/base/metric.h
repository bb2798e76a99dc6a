/* metric.h — a named measurement (value and unit), and a sink modules report them to: the
 * replay its accuracy metrics, a policy its own counters; the runner collects them into a run's
 * result, a test into any table of its own. */
#ifndef MPCSIM_METRIC_H
#define MPCSIM_METRIC_H

/* A named metric of a run. */
typedef struct run_metric {
    char name[48];
    double value;
    char unit[16];
} run_metric;

/* Where a module reports named metrics: the runner hands it its run_result's
 * (sim/scenario/runner.h, run_result_sink), a test any table of its own. add returns MS_OK or
 * an error code. */
typedef struct metric_sink {
    int (*add)(void *ctx, const char *name, double value, const char *unit);
    void *ctx;
} metric_sink;

#endif

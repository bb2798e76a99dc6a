/* runcfg.h — one fully resolved run: what a scenario grid point expands to, what the runner
 * executes and what the results database stores (as canonical YAML plus its hash). */
#ifndef MPCSIM_RUNCFG_H
#define MPCSIM_RUNCFG_H

#include <stddef.h>
#include <stdint.h>

#include "sim/engine/machine.h"
#include "models/model.h"
#include "sim/engine/net.h"
#include "protocols/program/proto.h"
#include "sim/engine/simulate.h"

#define RUN_MAX_PARAMS 24

typedef struct kv_param {
    char key[48];
    char val[208];
    int line, col; /* where it came from in the scenario (1-based), for errors */
} kv_param;

typedef struct run_cfg {
    char scenario[64];          /* scenario name */
    char scenario_path[512];
    size_t index;               /* grid point number within the scenario */

    char model_ref[64];         /* name or "inline" */
    model_cfg model;
    char proto_ref[32];
    proto_cfg proto;
    char net_ref[32];
    net_cfg net;
    machine_profile machine;

    struct {
        uint32_t prompt_len;    /* P */
        uint32_t decode_len;    /* generated tokens */
        uint32_t batch;         /* sequences decoded together */
        int prefill_in_mpc;     /* 1 (default): the private prompt is prefilled in MPC */
        uint32_t decode_stride; /* cost every k-th decode step exactly; others share its cost */
    } work;

    struct {
        char source[16];        /* none | record | synth | npy */
        char path[512];         /* npy trace dir, or text file for record */
        size_t n_params;        /* synth parameters (sinks, window, heavy, …) */
        kv_param params[RUN_MAX_PARAMS];
    } trace;

    struct {
        char name[32];          /* registered policy name */
        size_t n_params;
        kv_param params[RUN_MAX_PARAMS];
    } policy;

    uint64_t seed;
    int overlap;                /* sim option */

    char *yaml;                 /* resolved config as canonical YAML (owned) */
    char hash[17];              /* 16 hex digits of a 64-bit hash of yaml */
} run_cfg;

void run_cfg_free(run_cfg *c);

/* A named metric of a run. */
typedef struct run_metric {
    char name[48];
    double value;
    char unit[16];
} run_metric;

/* Where a module reports named metrics (the replay, its accuracy metrics): the runner hands it
 * its run_result's (run_result_sink), a test any table of its own. add returns MS_OK or an
 * error code. */
typedef struct metric_sink {
    int (*add)(void *ctx, const char *name, double value, const char *unit);
    void *ctx;
} metric_sink;

typedef struct run_result {
    run_metric *metric;
    size_t n_metric, cap_metric;
    sim_result phase[PHASE_N];  /* per-phase breakdown (category and layer) */
    double wall_s;              /* time the run took on this machine */
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

/* runcfg.h — one fully resolved run: what a scenario grid point expands to (sim/scenario/scn.h),
 * what the runner executes (sim/scenario/runner.h) and what the results database stores (as
 * canonical YAML plus its hash). It is made of the engine's, the models' and the protocols'
 * types only (the trace source and the policy are names and parameters), so it lives in the
 * lowest room that holds them all: the trace, policy, replay and serving rooms read it without
 * looking up at the scenarios. */
#ifndef MPCSIM_RUNCFG_H
#define MPCSIM_RUNCFG_H

#include <stddef.h>
#include <stdint.h>

#include "machine.h"
#include "models/model.h"
#include "net.h"
#include "protocols/base/kvparam.h"
#include "protocols/program/proto.h"

#define RUN_MAX_PARAMS 24

typedef struct run_cfg {
    char scenario[64]; /* scenario name */
    char scenario_path[512];
    size_t index; /* grid point number within the scenario */

    char model_ref[64]; /* name or "inline" */
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
        char source[16]; /* none | record | synth | npy */
        char path[512];  /* npy trace dir, or text file for record */
        size_t n_params; /* synth parameters (sinks, window, heavy, …) */
        kv_param params[RUN_MAX_PARAMS];
    } trace;

    struct {
        char name[32]; /* registered policy name */
        size_t n_params;
        kv_param params[RUN_MAX_PARAMS];
    } policy;

    uint64_t seed;
    int overlap; /* sim option */

    char *yaml;    /* resolved config as canonical YAML (owned) */
    char hash[17]; /* 16 hex digits of a 64-bit hash of yaml */
} run_cfg;

void run_cfg_free(run_cfg *c);

#endif

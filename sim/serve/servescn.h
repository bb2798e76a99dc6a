/* servescn.h — a serving scenario (schema: scenarios/SERVING.md): its settings and its reader.
 * Bad input gets "file:line:col: error: …" in the errbuf. */
#ifndef MPCSIM_SERVESCN_H
#define MPCSIM_SERVESCN_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/base/yschema.h"
#include "protocols/program/proto.h"
#include "sim/serve/kvshare.h"
#include "sim/serve/leak.h"
#include "sim/serve/serve.h"
#include "sim/serve/workload.h"

#define SERVE_MAX_RATES 32

/* Token counts are bounded by one prompt's cap (sim/serve/workload.c WL_MAX_PROMPT, 2^22);
 * counts of things by what a simulation of that many stays within memory and time. */
#define SERVE_TOKMAX (1u << 22)

typedef struct serve_scn {
    char name[64], path[512];
    char model[256], protocol[32], network[64], machine[256];
    char output[512], replay[512];
    uint64_t seed;
    wl_params wl;
    double rate[SERVE_MAX_RATES];
    size_t n_rate;
    int policy[KVS_N];
    size_t n_policy;
    serve_params sp;
    int attack;
    leak_params lp;
    int channel[2]; /* attack channels to run, in order */
    size_t n_channel;
    double bg_load;        /* attack: background load as a share of capacity */
    int pos_line, pos_col; /* where sharing.position was set (for the RoPE check) */
    /* protocol given as a mapping ({name: semi2k, compat: spu, …}): its keys over the named
     * protocol's defaults; otherwise (have_proto 0) the protocol's defaults */
    proto_cfg proto;
    int have_proto;
} serve_scn;

/* The defaults: the serving modules' own (workload, server, sharing, attack). */
void serve_scn_defaults(serve_scn *s);
/* Reads the scenario at path over s (set to the defaults first). */
int serve_scn_read(const char *path, serve_scn *s, errbuf *e);
/* The serving scenario's schema tables, one per section (for `mpcsim list keys serve`). */
const ys_schema *serve_scenario_schemas(size_t *n);

#endif

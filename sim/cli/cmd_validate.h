/* cmd_validate.h — the parts of `mpcsim validate` (sim/cli/cmd_validate.c: primitives and the
 * command line; sim/cli/cmd_validate_model.c: a real model's programs, accuracy, generation). */
#ifndef MPCSIM_CMD_VALIDATE_H
#define MPCSIM_CMD_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/engine/machine.h"
#include "protocols/program/proto.h"
#include "results/rdb.h"

typedef struct vm_args {
    const char *model;       /* "stories260K" */
    const char *text;        /* tokens from this file (NULL: a built-in sentence) */
    uint32_t prompt, decode; /* programs: a prefill of `prompt` tokens, then `decode` steps */
    uint32_t accuracy;       /* > 0: teacher-forced accuracy over this many positions */
    uint32_t generate;       /* > 0: greedy generation of this many tokens */
    const char *policy;      /* accuracy under a policy applied inside MPC */
    const char *policy_params[16];
    size_t n_policy_params;
    uint64_t latency_ns;
    double bandwidth_bps;
    int shape;     /* 1: bandwidth shaped with tbf between network namespaces */
    int plaintext; /* 1: --insecure-plaintext, no TLS on the backend's channels */
    int wide;      /* 1: --wide, every party's bytes (else 80 columns) */
    machine_profile mach;
    const char *session;
} vm_args;

int validate_model(const vm_args *a, const proto_cfg *cfgs, int n_cfgs, rdb *db, int *bad,
                   errbuf *e);
/* SecretFlow's basic-op task (input x at P0 and y at P1, add / mul / less, reveal) at n/4 and
 * n elements, measured and predicted (sim/cli/cmd_validate_basic.c). */
int validate_basic(const vm_args *a, const proto_cfg *cfgs, int n_cfgs, uint64_t n, errbuf *e);

#endif

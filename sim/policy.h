/* policy.h — KV-cache eviction and sparsity policies as registered ops tables.
 *
 * Adding a policy = one file sim/policy_<name>.c defining a `const policy_ops` and one row in
 * the registry (sim/policy.c). Exact algorithms and defaults:
 * ../shared/reference/policies.md. */
#ifndef MPCSIM_POLICY_H
#define MPCSIM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model.h"
#include "op.h"
#include "runcfg.h"

typedef struct policy_ops policy_ops;

/* Parameter names a policy accepts, with defaults, for validation and docs. */
typedef struct policy_param {
    const char *key;
    const char *def;     /* default value as text */
    const char *help;
} policy_param;

const policy_ops *policy_find(const char *name);
const policy_ops *const *policy_all(size_t *n);
const char *policy_name(const policy_ops *p);
const char *policy_summary(const policy_ops *p);
const policy_param *policy_params(const policy_ops *p, size_t *n);
/* Validates a scenario's parameters for a policy: unknown keys (with did-you-mean, reported at
 * the key's file:line:col), bad values. path is the scenario file for messages. */
int policy_check_params(const policy_ops *p, const kv_param *kv, size_t n, const char *path,
                        errbuf *e);

#endif

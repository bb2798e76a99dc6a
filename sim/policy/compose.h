/* compose.h — policies composed in YAML from building blocks, served as policy_ops.
 *
 * A scenario names one as `{compose: FILE.yaml, <params>}`. The file declares the blocks (keep
 * sinks and a recent window; a score; a granularity; when the selection runs; per-layer
 * budgets; top-k or threshold; sharing across the KV heads); the engine (compose.c) builds a
 * policy_ops from them whose select() runs the blocks on the replay's rows and whose
 * emit_cost() appends each block's own ops (score, selection, gather) through the op builder.
 * The file format and what each block costs: sim/policy/POLICIES.md "Composing a policy".
 *
 * A loaded composition is found by its name as a built-in is (policy_find), has a parameter
 * schema (policy_schema: the numbers of its blocks, their defaults the file's values) and stays
 * loaded for the life of the process (forked workers inherit it). */
#ifndef MPCSIM_POLICY_COMPOSE_H
#define MPCSIM_POLICY_COMPOSE_H

#include <stddef.h>

#include "policy.h"

/* Most compositions one process loads. */
#define POLICY_COMPOSE_MAX 16

/* Reads and checks the file at path (once: the same file again gives the same ops). Errors
 * are "path:line:col: error: ..." at the offending key or value. */
int policy_compose_load(const char *path, const policy_ops **out, errbuf *e);
/* A loaded composition by its policy name, or NULL. */
const policy_ops *policy_compose_find(const char *name);
/* The composition's slot (0 ≤ slot < POLICY_COMPOSE_MAX), or -1 for a policy that is not one. */
int policy_compose_slot(const policy_ops *p);
/* The file a loaded composition came from (as given to policy_compose_load), or NULL. */
const char *policy_compose_path(const policy_ops *p);

#endif

/* scn_int.h — what the parts of the scenario reader share (private to sim/scenario/scn*.c):
 * the reading context and its messages, the value readers (scn.c), the sweep (scn_sweep.c), one
 * reader per top-level key (scn_system.c: model, protocol, network, machine, workload;
 * scn_policy.c: trace, policy, and what the run will need), canonical YAML (scn_yaml.c). */
#ifndef MPCSIM_SCN_INT_H
#define MPCSIM_SCN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "scn.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

#define SCN_MAX_RUNS 10000 /* a bigger sweep is almost surely a mistake; split the file */
#define SCN_FORMAT 1

typedef struct scn_ctx {
    ys_ctx y;         /* messages and value readers (protocols/base/yschema.h) */
    const char *path; /* scenario file, for messages */
    char dir[512];    /* its folder, for relative paths */
    int zip;          /* sweep: zip */
    errbuf *e;
    yx_node **made; /* nodes built by the expansion (shallow: children are borrowed) */
    size_t n_made, cap_made;
} scn_ctx;

/* The scenario's messages and value readers are the schema layer's (yschema.h), so every
 * input file reads the same way; these names keep the readers below short. */
#define fail(x, at, ...) ys_fail(&(x)->y, at, __VA_ARGS__)

/* ---- scn.c: messages and value readers */
int fail_wrap(scn_ctx *x, const yx_node *at, const char *hint, const char *what, const char *msg);
int check_keys(scn_ctx *x, const yx_node *m, const char *where, const char *const *keys, size_t n);
int unknown_name(scn_ctx *x, const yx_node *at, const char *what, const char *name,
                 const char *const *cands, size_t n, const char *hint);
void hint_names(char *hint, size_t cap, const char *head, const char *const *names, size_t n);
void hint_searched(char *hint, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int need_scalar(scn_ctx *x, const yx_node *v, const char *key, const char *type);
int need_map(scn_ctx *x, const yx_node *v, const char *key, const char *example);
int read_double(scn_ctx *x, const yx_node *v, const char *key, double lo, double hi, double *out);
int bool_text(const char *s);
void fmt_double(char *buf, size_t cap, double d);
void norm_value(const yx_node *v, char *out, size_t cap);
int resolve_path(scn_ctx *x, const yx_node *v, const char *key, char *out, size_t cap);

/* ---- scn_sweep.c: the sweep expansion */
typedef struct xset {
    const yx_node **v;
    size_t n;
    const yx_node *src; /* the list that set n (for zip messages), NULL when n == 1 */
} xset;
int xset_push(xset *s, const yx_node *n);
int expand(scn_ctx *x, const yx_node *n, xset *out);
void made_free(scn_ctx *x);

/* ---- scn_system.c: model, protocol, network, machine, workload */
extern const char *const mach_keys[];
int read_model(scn_ctx *x, const yx_node *v, run_cfg *c);
int read_protocol(scn_ctx *x, const yx_node *v, run_cfg *c);
int read_network(scn_ctx *x, const yx_node *v, run_cfg *c);
int read_machine(scn_ctx *x, const yx_node *v, run_cfg *c);
int read_workload(scn_ctx *x, const yx_node *v, run_cfg *c);

/* ---- scn_policy.c: trace, policy, what the run will need */
int read_trace(scn_ctx *x, const yx_node *v, run_cfg *c);
int read_policy(scn_ctx *x, const yx_node *v, run_cfg *c);
int check_run_needs(scn_ctx *x, const yx_node *r, const run_cfg *c);

/* ---- scn_figures.c: the figures the scenario declares */
int read_figures(scn_ctx *x, const yx_node *v, scenario *s);

#endif

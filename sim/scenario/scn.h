/* scn.h — scenario files: YAML (libyaml) → validated sweep grid → resolved run configs.
 *
 * Any scalar may be a list; `sweep: grid` (default) takes the cartesian product of all lists,
 * `sweep: zip` walks them in step (equal lengths). Models, protocols and networks are named
 * (models/<name>.yaml, protocols/<name>.yaml, network presets) or given inline. Every error is
 * "file:line:col: error: …" with a hint, and returns MS_ERR_INPUT. Schema: scenarios/README.md. */
#ifndef MPCSIM_SCN_H
#define MPCSIM_SCN_H

#include <stddef.h>

#include "sim/engine/runcfg.h"

/* A figure the scenario declares (`figures:`), in `mpcsim plot`'s vocabulary; `mpcsim run`
 * draws them after the sweep. */
#define SCN_MAX_FIGURES 16
typedef struct scn_figure {
    char figure[16]; /* budget, cost, pareto, study or breakdown; "" when y is given */
    char y[256];     /* comma-separated metrics */
    char x[64];      /* "": the figure's own */
    char row[128];   /* facet keys, comma-separated ("": what varies) */
    char col[128];
    char metric[64]; /* budget, pareto: the accuracy metric */
    char name[128];  /* NAME.png|svg|pdf, or "": the figure's own name, PNG */
} scn_figure;

typedef struct scenario {
    char name[64];
    char path[512];
    char *yaml;   /* the scenario file's text */
    char db[512]; /* output database named in the file ("output:"), may be empty */
    run_cfg *runs;
    size_t n_runs;
    scn_figure figures[SCN_MAX_FIGURES];
    size_t n_figures;
} scenario;

/* Loads and expands a scenario; text may be NULL (read path) or the file's contents (path is
 * then used in messages only). */
int scn_load(const char *path, const char *text, scenario *s, errbuf *e);
void scn_free(scenario *s);

/* Canonical YAML for a resolved run (what run_cfg.yaml holds) and its 64-bit hash. */
int scn_resolve_yaml(run_cfg *c, errbuf *e);

/* The protocol a stored canonical config (root: its parsed YAML) ran with: the keys the
 * canonical YAML leaves out at the values they had before the key existed (msb: ks,
 * exp: taylor, normalize: thresholds; aby3 without 'trunc': Share Truncation I) are set to
 * those values, where scn_load gives today's defaults. */
struct yx_node;
void scn_stored_protocol(const struct yx_node *root, proto_cfg *p);

/* The keys of a scenario's 'workload' (for `mpcsim list keys workload`). */
const struct ys_schema *scn_workload_schema(void);
/* The scenario's top-level keys and those of its 'network', a link ('links' entries,
 * 'dealer'), 'wire' and 'trace' (for `mpcsim list keys`); the protocol's are
 * proto_cfg_schema()'s, a policy entry's policy_schema()'s. */
const struct ys_schema *scn_schema(void);
const struct ys_schema *scn_network_schemas(size_t *n);
const struct ys_schema *scn_trace_schema(void);
/* The keys of an entry of 'figures'. */
const struct ys_schema *scn_figure_schema(void);

/* The machine profiles a scenario may name: the files <datadir>/protocols/machines/NAME.yaml,
 * as NAME in the folder's order, at most max. 0, or -1 when the folder cannot be read. */
int scn_machine_names(char names[][64], size_t max, size_t *n);

#endif

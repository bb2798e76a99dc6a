/* runlabel.h — how a run is named in the results database, reports and plots: the policy with
 * the parameters that differ from its defaults ("snapkv(capacity=1024)"), the network as its
 * preset or its link values ("lan", "20ms/300Mbps"), the model as the user named it. */
#ifndef MPCSIM_RUNLABEL_H
#define MPCSIM_RUNLABEL_H

#include <stddef.h>

#include "results/rdb.h"
#include "sim/engine/runcfg.h"

/* "h2o(heavy_ratio=0.1,recent_ratio=0.1)"; the bare name when every parameter is a default. */
void run_label_policy(const run_cfg *c, char *out, size_t n);
/* The same parameters as words, for a heading or a title: "h2o heavy_ratio=0.1 recent_ratio=0.1".
 */
void run_label_policy_words(const run_cfg *c, char *out, size_t n);
/* The protocol with the options that differ from its defaults, in the schema's order
 * (proto_cfg_schema): "aby3(trunc=local,topk=quickselect)"; the bare name when every option
 * is a default. Every option is compared, so two configurations never share a label. */
void run_label_protocol(const proto_cfg *p, char *out, size_t n);
/* A preset's name when the links are the preset's; "LAT/BW" when every party-to-party link
 * is the same ("0.1ms/10Gbps"); else the network's own name, or "LATmax/BWmin+" (the slowest
 * link's values) when it has none; then " tcp" or " tls" when the links carry that framing
 * (" tcp*": with values of its own). *lat_ms, *bw_mbps: the slowest link's one-way latency and
 * the smallest bandwidth. */
void run_label_network(const run_cfg *c, char *out, size_t n, double *lat_ms, double *bw_mbps);
/* The model's reference, or for an inline model the name it was given ("inline" if none);
 * a shipped model with keys replaced, its name and those keys: "stories260K(layers=2)". */
void run_label_model(const run_cfg *c, char *out, size_t n);
/* Every label of a run, for rdb_labels. */
void run_labels(const run_cfg *c, rdb_labels *l);
/* rdb_labeler: reloads a stored canonical config (a one-run scenario) and labels it. */
int run_labels_from_yaml(const char *config_yaml, rdb_labels *out);

#endif

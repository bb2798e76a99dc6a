/* metric_def.h — the metric registry: every metric a run or a serving run stores, with its unit
 * (the string stored beside the value), its kind, which way is better and a one-line meaning.
 * The database refuses a metric it does not list (results/rdb.c), and `report`, `plot` and the
 * serving tables read a metric's kind, unit and direction here, never from its name.
 *
 * Units (as stored): "s" seconds, "B" bytes (8 bits), "ratio" a fraction in [0, 1], "nats"
 * natural-log units, "ppl" perplexity (tokens, exp of the mean negative log-likelihood),
 * "rounds" communication rounds, "steps" decode steps, "entries" cache entries, "ops" ops,
 * "tok/s" tokens per second, "req/s" requests per second; "" a plain count or fraction named in
 * the meaning. */
#ifndef MPCSIM_METRIC_DEF_H
#define MPCSIM_METRIC_DEF_H

#include <stddef.h>

typedef enum metric_kind {
    MK_COST,     /* what the MPC protocol costs: time, bytes, rounds */
    MK_ACCURACY, /* the policy's output against the full cache */
    MK_POLICY,   /* a policy's own counter */
    MK_SERVING   /* a serving run's (mpcsim serve) */
} metric_kind;

typedef enum metric_dir {
    MD_NONE,   /* neither way is better (a setting or a count) */
    MD_LOWER,  /* lower is better */
    MD_HIGHER, /* higher is better */
} metric_dir;

typedef struct metric_def {
    const char *name; /* a PER_PARTY metric is stored as name_p0, name_p1, ... */
    const char *unit;
    metric_kind kind;
    metric_dir dir;
    int per_party;
    const char *meaning;
} metric_def;

/* The registry's entry for a stored metric name (bytes_online_p1 finds bytes_online_p), or
 * NULL when the name is not registered. */
const metric_def *metric_def_find(const char *name);
/* The registry, in order (for listings and tests). */
const metric_def *metric_defs(size_t *n);
const char *metric_kind_name(metric_kind k);
const char *metric_dir_name(metric_dir d);

#endif

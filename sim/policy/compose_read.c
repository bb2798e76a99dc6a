/* compose_read.c — a composition file read into its blocks and parameters (compose_int.h),
 * every error at its file:line:col. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compose_int.h"

/* ---- reading the file -------------------------------------------------------------------- */

int compose_rfail(rd *r, const yx_node *at, const char *hint, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(r->e, MS_ERR_INPUT, "%s:%d:%d: error: %s%s%s", r->path, at ? at->line : 1,
                   at ? at->col : 1, msg, hint ? "\n  hint: " : "", hint ? hint : "");
}

static int need_keys(rd *r, const yx_node *m, const char *what, const char *const *keys)
{
    if (m->kind != YX_MAP)
        return compose_rfail(r, m, NULL, "'%s' must be a mapping, not %s", what, yx_kind_name(m));
    for (size_t i = 0; i < m->n; i++) {
        size_t k = 0;
        while (keys[k] && strcmp(keys[k], m->key[i]->str))
            k++;
        if (!keys[k]) {
            char hint[300] = "keys:";
            for (k = 0; keys[k]; k++)
                snprintf(hint + strlen(hint), sizeof hint - strlen(hint), " %s", keys[k]);
            return compose_rfail(r, m->key[i], hint, "unknown key '%s' in '%s'", m->key[i]->str,
                                 what);
        }
    }
    return MS_OK;
}

/* A number in [lo, hi] (whole: an integer) from scalar v, as text into def. */
static int read_num(rd *r, const yx_node *v, const char *what, double lo, double hi, int whole,
                    char *def, size_t cap)
{
    if (v->kind != YX_SCALAR)
        return compose_rfail(r, v, NULL, "'%s' must be a number, not %s", what, yx_kind_name(v));
    char *end;
    double x = strtod(v->str, &end);
    if (!v->str[0] || *end || !(x >= lo && x <= hi) || (whole && x != floor(x)))
        return compose_rfail(r, v, NULL, "'%s' = '%s' must be %s in [%g, %g]", what, v->str,
                             whole ? "a whole number" : "a number", lo, hi);
    snprintf(def, cap, "%s", v->str);
    return MS_OK;
}

/* Appends parameter key (default def, the file's value) to the slot. */
static void add_param(cslot *sl, const char *key, const char *def, const char *help,
                      const char *choices, double lo, double hi, int whole)
{
    size_t i = sl->ops.n_params++;
    snprintf(sl->defs[i], sizeof sl->defs[i], "%s", def);
    sl->params[i] = (policy_param){key, sl->defs[i], help, choices, lo, hi, whole};
}

/* A word among choices ("a|b|c") from scalar v: its index. */
static int read_word(rd *r, const yx_node *v, const char *what, const char *const *words, int *out)
{
    if (v->kind == YX_SCALAR)
        for (int i = 0; words[i]; i++)
            if (!strcmp(words[i], v->str)) {
                *out = i;
                return MS_OK;
            }
    char hint[300] = "one of:";
    for (int i = 0; words[i]; i++)
        snprintf(hint + strlen(hint), sizeof hint - strlen(hint), " %s", words[i]);
    return compose_rfail(r, v, hint, "'%s' = '%s' is not a known %s", what,
                         v->kind == YX_SCALAR ? v->str : yx_kind_name(v), what);
}

/* A block written as a word or a one-key mapping {word: options}: the word's index, options. */
static int read_block(rd *r, const yx_node *v, const char *what, const char *const *words, int *out,
                      const yx_node **opts)
{
    *opts = NULL;
    if (v->kind == YX_MAP) {
        if (v->n != 1)
            return compose_rfail(r, v, "write e.g. {window_attention: {window: 32}}",
                                 "'%s' names one block, not %zu", what, v->n);
        *opts = v->item[0];
        return read_word(r, v->key[0], what, words, out);
    }
    return read_word(r, v, what, words, out);
}

/* granularity: {clusters: {size: S, levels: 1|2, ratio1: R}} (at v, its options opts). */
static int read_clusters(rd *r, const yx_node *v, const yx_node *opts, cslot *sl)
{
    static const char *const ck[] = {"size", "levels", "ratio1", NULL};
    cspec *sp = &sl->sp;
    char sz[32] = "16", lv[32] = "2", r1[32] = "0.5";
    const yx_node *x;
    int rc;
    if (opts && (rc = need_keys(r, opts, "clusters", ck)))
        return rc;
    if ((x = yx_map_get(opts, "size")) && (rc = read_num(r, x, "size", 1, 1e6, 1, sz, sizeof sz)))
        return rc;
    if ((x = yx_map_get(opts, "levels")) && (rc = read_num(r, x, "levels", 1, 2, 1, lv, sizeof lv)))
        return rc;
    sp->cluster = 1;
    sp->csize = (uint32_t)atoi(sz);
    sp->levels = atoi(lv);
    add_param(sl, "cluster", sz, "cluster size in entries of K' (a parent: a pair of clusters)",
              NULL, 1, 1e6, 1);
    if ((x = yx_map_get(opts, "ratio1"))) {
        if (sp->levels != 2)
            return compose_rfail(r, x, "add levels: 2", "'ratio1' chooses parents: two levels");
        if ((rc = read_num(r, x, "ratio1", 0, 1, 0, r1, sizeof r1)))
            return rc;
    }
    if (sp->levels == 2)
        add_param(sl, "ratio1", r1, "parents (pairs of clusters) chosen first: floor(ratio1·G1)",
                  NULL, 0, 1, 0);
    (void)v;
    return MS_OK;
}

/* static: {keep: threshold|topk|none, threshold: X, ratio: R, window: W}, and the rules of
 * cluster granularity (what the cluster engine runs: compose_cluster.c). */
static int read_static(rd *r, const yx_node *root, cslot *sl)
{
    static const char *const sk[] = {"keep", "threshold", "ratio", "window", NULL};
    static const char *const modes[] = {"threshold", "topk", "none", NULL};
    cspec *sp = &sl->sp;
    const yx_node *v = yx_map_get(root, "static"), *x;
    char th[32] = "1e-4", ra[32] = "0.5", wi[32] = "0.2";
    int rc;
    sp->stat_mode = 2;
    if (!sp->cluster) {
        if (v)
            return compose_rfail(r, v, "add granularity: {clusters: {size: 16}}",
                                 "'static' prefilters the prompt for cluster granularity");
        if (sp->score == SC_CLUSTER)
            return compose_rfail(r, yx_map_get(root, "score"),
                                 "add granularity: {clusters: {size: 16}}",
                                 "cluster_bounds scores clusters: it needs granularity clusters");
        return MS_OK;
    }
    /* no sinks parameter: the first cluster is always kept */
    for (size_t i = 0; i + 1 < sl->ops.n_params; i++) {
        sl->params[i] = sl->params[i + 1];
        memcpy(sl->defs[i], sl->defs[i + 1], sizeof sl->defs[i]);
        sl->params[i].def = sl->defs[i];
    }
    sl->ops.n_params--;
    static const char *const no[] = {"sinks", "recent", "evict", "kv_budget", NULL};
    for (int i = 0; no[i]; i++)
        if ((x = yx_map_get(root, no[i])))
            return compose_rfail(r, x, NULL,
                                 "'%s' does not go with cluster granularity (its "
                                 "first and last clusters are kept)",
                                 no[i]);
    if (sp->score != SC_CLUSTER)
        return compose_rfail(r, yx_map_get(root, "granularity"), "add score: cluster_bounds",
                             "cluster granularity is scored by cluster_bounds");
    if (sp->when != W_STEP || sp->every != 1)
        return compose_rfail(r, yx_map_get(root, "when"), "use when: step",
                             "clusters are chosen at every decode step");
    if (sp->sel != K_TOPK || sp->ktype != KT_RATIO)
        return compose_rfail(r, yx_map_get(root, "select"), "write select: {topk: {ratio: 0.2}}",
                             "clusters are chosen by a top-k ratio");
    if (v) {
        if ((rc = need_keys(r, v, "static", sk)))
            return rc;
        if ((x = yx_map_get(v, "keep")) &&
            (rc = read_word(r, x, "static keep", modes, &sp->stat_mode)))
            return rc;
        if ((x = yx_map_get(v, "threshold")) &&
            (rc = read_num(r, x, "static.threshold", 0, 1, 0, th, sizeof th)))
            return rc;
        if ((x = yx_map_get(v, "ratio")) &&
            (rc = read_num(r, x, "static.ratio", 0, 1, 0, ra, sizeof ra)))
            return rc;
        if ((x = yx_map_get(v, "window")) &&
            (rc = read_num(r, x, "static.window", 0, 1, 0, wi, sizeof wi)))
            return rc;
    }
    if (!yx_map_get(root, "layers"))
        add_param(sl, "dense_layers", "0", "first layers kept dense (0 or 2)", NULL, 0, 2, 1);
    add_param(sl, "static", modes[sp->stat_mode], "static eviction at the prompt",
              "threshold|topk|none", 0, 0, 0);
    add_param(sl, "static_threshold", th,
              "keep j if a window query's head-mean attention on j reaches this", NULL, 0, 1, 0);
    add_param(sl, "static_ratio", ra, "static topk: kept fraction of the prompt per KV head", NULL,
              0, 1, 0);
    add_param(sl, "window_frac", wi,
              "static window as a fraction of the prompt (half of it above 24000 tokens)", NULL, 0,
              1, 0);
    return MS_OK;
}

int compose_read_spec(rd *r, const yx_node *root, cslot *sl)
{
    static const char *const top[] = {"name",        "summary",   "sinks",  "recent", "score",
                                      "granularity", "when",      "evict",  "select", "layers",
                                      "share",       "kv_budget", "static", NULL};
    cspec *sp = &sl->sp;
    char def[32];
    int rc = need_keys(r, root, "composition", top);
    if (rc)
        return rc;
    const yx_node *name = yx_map_get(root, "name");
    if (!name)
        return compose_rfail(r, root, "write e.g. name: my_policy", "missing required key 'name'");
    size_t len = name->kind == YX_SCALAR ? strlen(name->str) : 0;
    int ok = len > 0 && len < sizeof sl->name;
    for (size_t i = 0; ok && i < len; i++)
        ok = (name->str[i] >= 'a' && name->str[i] <= 'z') ||
             (name->str[i] >= '0' && name->str[i] <= '9') || name->str[i] == '_';
    if (!ok)
        return compose_rfail(r, name, NULL, "the policy name must be 1 to 31 of [a-z0-9_]");
    if (policy_find(name->str))
        return compose_rfail(r, name, "name the composition apart from the built-in policies",
                             "the policy name '%s' is taken", name->str);
    snprintf(sl->name, sizeof sl->name, "%s", name->str);
    const yx_node *v = yx_map_get(root, "summary");
    if (v && v->kind != YX_SCALAR)
        return compose_rfail(r, v, NULL, "'summary' must be text, not %s", yx_kind_name(v));
    snprintf(sl->summary, sizeof sl->summary, "%s",
             v && v->kind == YX_SCALAR ? v->str : "composed from blocks");
    add_param(sl, "sinks", "0", "attention-sink entries kept at the start", NULL, 0, 1e9, 1);
    if ((v = yx_map_get(root, "sinks")) &&
        (rc = read_num(r, v, "sinks", 0, 1e9, 1, sl->defs[0], sizeof sl->defs[0])))
        return rc;
    if ((v = yx_map_get(root, "recent"))) {
        sp->has_recent = 1;
        if (v->kind == YX_MAP) {
            static const char *const rk[] = {"ratio", NULL};
            const yx_node *ra = yx_map_get(v, "ratio");
            if ((rc = need_keys(r, v, "recent", rk)))
                return rc;
            if (!ra)
                return compose_rfail(r, v, "write recent: N or recent: {ratio: R}",
                                     "missing key 'ratio' in 'recent'");
            if ((rc = read_num(r, ra, "recent.ratio", 0, 1, 0, def, sizeof def)))
                return rc;
            sp->recent_ratio = 1;
            add_param(sl, "recent_ratio", def,
                      "recent window as a fraction of the prompt (int(ratio·P))", NULL, 0, 1, 0);
            add_param(sl, "recent", "0", "recent window in entries; 0: recent_ratio", NULL, 0, 1e9,
                      1);
        } else {
            if ((rc = read_num(r, v, "recent", 0, 1e9, 1, def, sizeof def)))
                return rc;
            add_param(sl, "recent", def, "most recent entries kept", NULL, 0, 1e9, 1);
        }
    }
    const yx_node *opts = NULL, *score = yx_map_get(root, "score");
    static const char *const score_words[] = {"attention",   "window_attention", "key_norm",
                                              "page_bounds", "random",           "cluster_bounds",
                                              NULL};
    if (score) {
        int w;
        if ((rc = read_block(r, score, "score", score_words, &w, &opts)))
            return rc;
        sp->score = w + 1;
    }
    sp->maxpool = 1;
    if (sp->score == SC_WINDOW) {
        static const char *const wk[] = {"window", "kernel", "pooling", NULL};
        static const char *const pools[] = {"maxpool", "avgpool", NULL};
        char w[32] = "32", k[32] = "7";
        int pool = 0;
        if (opts && (rc = need_keys(r, opts, "window_attention", wk)))
            return rc;
        const yx_node *x;
        if ((x = yx_map_get(opts, "window")) &&
            (rc = read_num(r, x, "window", 1, 1e9, 1, w, sizeof w)))
            return rc;
        if ((x = yx_map_get(opts, "kernel")) &&
            (rc = read_num(r, x, "kernel", 1, 1e6, 1, k, sizeof k)))
            return rc;
        if ((x = yx_map_get(opts, "pooling")) && (rc = read_word(r, x, "pooling", pools, &pool)))
            return rc;
        sp->maxpool = pool == 0;
        add_param(sl, "window", w, "observation window: the last prompt queries that vote", NULL, 1,
                  1e9, 1);
        add_param(sl, "kernel", k, "pooling kernel of the votes", NULL, 1, 1e6, 1);
        add_param(sl, "pooling", pools[pool], "pooling of the votes", "maxpool|avgpool", 0, 0, 0);
    } else if (sp->score == SC_RANDOM) {
        static const char *const rk[] = {"seed", NULL};
        char sd[32] = "0";
        const yx_node *x;
        if (opts && (rc = need_keys(r, opts, "random", rk)))
            return rc;
        if ((x = yx_map_get(opts, "seed")) &&
            (rc = read_num(r, x, "seed", 0, 4294967295.0, 1, sd, sizeof sd)))
            return rc;
        add_param(sl, "seed", sd, "seed of the random scores", NULL, 0, 4294967295.0, 1);
    } else if (sp->score == SC_CLUSTER) {
        static const char *const ck[] = {"alpha", NULL};
        char al[32] = "0.6";
        const yx_node *x;
        if (opts && (rc = need_keys(r, opts, "cluster_bounds", ck)))
            return rc;
        if ((x = yx_map_get(opts, "alpha")) &&
            (rc = read_num(r, x, "alpha", 0, 1, 0, al, sizeof al)))
            return rc;
        add_param(sl, "alpha", al, "weight of a cluster's key max in its bound (1 − alpha: min)",
                  NULL, 0, 1, 0);
    } else if (sp->score == SC_ATT && opts && !(opts->kind == YX_MAP && opts->n == 0)) {
        static const char *const ak[] = {"accumulate", NULL}, *const tf[] = {"true", "false", NULL};
        const yx_node *x;
        int w = 0;
        if ((rc = need_keys(r, opts, "attention", ak)))
            return rc;
        if ((x = yx_map_get(opts, "accumulate")) && (rc = read_word(r, x, "accumulate", tf, &w)))
            return rc;
        sp->att_last = w == 1;
    } else if (opts && !(opts->kind == YX_MAP && opts->n == 0)) {
        return compose_rfail(r, opts, NULL, "score '%s' takes no options", score_names[sp->score]);
    }
    sp->page = 1;
    if ((v = yx_map_get(root, "granularity"))) {
        static const char *const gw[] = {"token", "page", "clusters", NULL};
        int w;
        if ((rc = read_block(r, v, "granularity", gw, &w, &opts)))
            return rc;
        if (w == 2 && (rc = read_clusters(r, v, opts, sl)))
            return rc;
        if (w == 1) {
            char pg[32] = "16";
            if (opts && (rc = read_num(r, opts, "page", 1, 1e6, 1, pg, sizeof pg)))
                return rc;
            sp->page = (uint32_t)atoi(pg);
            add_param(sl, "page", pg, "page size in entries", NULL, 1, 1e6, 1);
        }
    }
    sp->when = W_STEP;
    sp->every = 1;
    if ((v = yx_map_get(root, "when"))) {
        static const char *const ww[] = {"once", "step", "every", NULL};
        int w;
        if ((rc = read_block(r, v, "when", ww, &w, &opts)))
            return rc;
        sp->when = w == 0 ? W_ONCE : W_STEP;
        if (w == 2) {
            char ev[32];
            if (!opts)
                return compose_rfail(r, v, "write when: {every: N}", "'every' needs a step count");
            if ((rc = read_num(r, opts, "every", 1, 1e9, 1, ev, sizeof ev)))
                return rc;
            sp->every = (uint32_t)atoi(ev);
            add_param(sl, "every", ev, "decode steps between selections", NULL, 1, 1e9, 1);
        }
    }
    if ((v = yx_map_get(root, "evict"))) {
        static const char *const ew[] = {"none", "permanent", NULL};
        if ((rc = read_word(r, v, "evict", ew, &sp->permanent)))
            return rc;
        if (sp->permanent && (sp->when != W_STEP || sp->every != 1))
            return compose_rfail(r, v, "use evict: permanent with when: step",
                                 "a permanent eviction runs at every step");
    }
    const yx_node *sel = yx_map_get(root, "select");
    if (sel) {
        static const char *const sk[] = {"topk", "threshold", "min", NULL};
        if ((rc = need_keys(r, sel, "select", sk)))
            return rc;
        const yx_node *tk = yx_map_get(sel, "topk"), *th = yx_map_get(sel, "threshold"),
                      *mn = yx_map_get(sel, "min");
        if (!!tk == !!th)
            return compose_rfail(r, sel, "write select: {topk: N} or select: {threshold: X}",
                                 "'select' has one of 'topk' and 'threshold'");
        if (th) {
            sp->sel = K_THRESHOLD;
            if ((rc = read_num(r, th, "threshold", -1e30, 1e30, 0, def, sizeof def)))
                return rc;
            add_param(sl, "threshold", def, "kept: candidates whose score is at least this", NULL,
                      -1e30, 1e30, 0);
        } else {
            sp->sel = K_TOPK;
            if (tk->kind == YX_MAP) {
                static const char *const kk[] = {"ratio", "capacity", NULL};
                if ((rc = need_keys(r, tk, "topk", kk)))
                    return rc;
                if (tk->n != 1)
                    return compose_rfail(r, tk, "write topk: {ratio: R} or topk: {capacity: C}",
                                         "'topk' takes one of 'ratio' and 'capacity'");
                const yx_node *x = tk->item[0];
                if (!strcmp(tk->key[0]->str, "ratio") && sp->cluster) {
                    sp->ktype = KT_RATIO;
                    if ((rc = read_num(r, x, "topk.ratio", 0, 1, 0, def, sizeof def)))
                        return rc;
                    add_param(sl, "topk_ratio", def,
                              "clusters kept: floor(ratio·G) of the G clusters (two levels: of the "
                              "clusters of the chosen parents)",
                              NULL, 0, 1, 0);
                } else if (!strcmp(tk->key[0]->str, "ratio")) {
                    sp->ktype = KT_RATIO;
                    if ((rc = read_num(r, x, "topk.ratio", 0, 1, 0, def, sizeof def)))
                        return rc;
                    add_param(sl, "topk_ratio", def,
                              "top-k entries as a fraction of the prompt (int(ratio·P))", NULL, 0,
                              1, 0);
                    add_param(sl, "topk", "0", "top-k entries; 0: topk_ratio", NULL, 0, 1e9, 1);
                } else {
                    sp->ktype = KT_CAP;
                    if ((rc = read_num(r, x, "topk.capacity", 1, 1e9, 1, def, sizeof def)))
                        return rc;
                    add_param(sl, "capacity", def,
                              "entries kept, the sinks and the recent window included", NULL, 1,
                              1e9, 1);
                }
            } else {
                sp->ktype = KT_TOKENS;
                if ((rc = read_num(r, tk, "topk", 0, 1e9, 1, def, sizeof def)))
                    return rc;
                add_param(sl, "topk", def, "top-k entries (pages: entries // page pages)", NULL, 0,
                          1e9, 1);
            }
        }
        if (mn) {
            if (sp->sel != K_TOPK)
                return compose_rfail(r, mn, NULL, "'min' goes with 'topk'");
            if ((rc = read_num(r, mn, "min", 0, 1e9, 1, def, sizeof def)))
                return rc;
            add_param(sl, "min_units", def, "units (entries or pages) the top-k keeps at least",
                      NULL, 0, 1e9, 1);
        }
    }
    if (sp->score && !sel)
        return compose_rfail(r, score, "add e.g. select: {topk: 64}",
                             "a score needs a 'select' block");
    if (sel && !sp->score)
        return compose_rfail(r, sel, "add e.g. score: attention", "a 'select' block needs a score");
    if (sp->permanent && !sel)
        return compose_rfail(r, yx_map_get(root, "evict"), NULL,
                             "a permanent eviction needs a selection");
    if (sp->score == SC_WINDOW && sp->when != W_ONCE)
        return compose_rfail(r, score, "add when: once",
                             "window_attention scores the prompt's last queries: it selects once");
    if (sp->score == SC_BOUNDS && sp->page == 1)
        return compose_rfail(r, score, "add granularity: {page: 16}",
                             "page_bounds scores pages: it needs granularity page");
    if (sp->score == SC_BOUNDS && sp->when == W_ONCE)
        return compose_rfail(r, score, "use when: step", "page_bounds scores the step's query");
    if ((rc = read_static(r, root, sl)))
        return rc;
    if ((v = yx_map_get(root, "layers"))) {
        static const char *const lk[] = {"dense", "pyramid", NULL};
        const yx_node *x;
        if (v->kind == YX_SCALAR && !strcmp(v->str, "uniform")) {
            /* every layer the same budget: the default */
        } else if (v->kind == YX_MAP && (x = yx_map_get(v, "pyramid"))) {
            static const char *const pk[] = {"beta", NULL};
            const yx_node *b = NULL;
            char beta[32] = "20";
            if ((rc = need_keys(r, v, "layers", lk)) ||
                (x->kind == YX_MAP && (rc = need_keys(r, x, "pyramid", pk))))
                return rc;
            if (v->n != 1)
                return compose_rfail(r, v, NULL, "'layers' has one of 'dense' and 'pyramid'");
            if (sp->ktype != KT_CAP || sp->sel != K_TOPK)
                return compose_rfail(r, x, "add select: {topk: {capacity: C}}",
                                     "a pyramid spreads a capacity over the layers");
            if ((b = yx_map_get(x, "beta")) &&
                (rc = read_num(r, b, "pyramid.beta", 1, 1e6, 1, beta, sizeof beta)))
                return rc;
            sp->pyramid = 1;
            add_param(sl, "beta", beta, "pyramid steepness: the top layer keeps (C - w) / beta",
                      NULL, 1, 1e6, 1);
        } else {
            if ((rc = need_keys(r, v, "layers", lk)))
                return rc;
            if (!(x = yx_map_get(v, "dense")))
                return compose_rfail(r, v, "write layers: {dense: 2}",
                                     "missing key 'dense' in 'layers'");
            if ((rc = read_num(r, x, "layers.dense", 0, 1e6, 1, def, sizeof def)))
                return rc;
            add_param(sl, "dense_layers", def, "first layers kept dense", NULL, 0, 1e6, 1);
        }
    }
    sp->lshare = 1;
    if ((v = yx_map_get(root, "share"))) {
        static const char *const shw[] = {"kv_head", "layer", NULL}, *const sk[] = {"heads",
                                                                                    "layers",
                                                                                    "from", NULL};
        const yx_node *x;
        if (v->kind == YX_MAP) {
            if ((rc = need_keys(r, v, "share", sk)))
                return rc;
            if ((x = yx_map_get(v, "heads")) &&
                (rc = read_word(r, x, "share", shw, &sp->share_all)))
                return rc;
            if ((x = yx_map_get(v, "layers"))) {
                if ((rc = read_num(r, x, "share.layers", 1, 1e6, 1, def, sizeof def)))
                    return rc;
                sp->lshare = (uint32_t)atoi(def);
                if (sp->permanent && sp->lshare > 1)
                    return compose_rfail(
                        r, x, NULL,
                        "a permanent eviction keeps each layer's own cache: its layers "
                        "share no selection");
                if (sp->pyramid && sp->lshare > 1)
                    return compose_rfail(
                        r, x, NULL,
                        "a pyramid gives each layer its own budget: its layers share no selection");
            }
            if ((x = yx_map_get(v, "from"))) {
                if (!sp->cluster)
                    return compose_rfail(r, x,
                                         "use granularity: clusters, or share from the first "
                                         "selecting layer (the default)",
                                         "'share.from' goes with cluster granularity");
                if ((rc = read_num(r, x, "share.from", 0, 1e6, 1, def, sizeof def)))
                    return rc;
                sp->lfrom = (uint32_t)atoi(def);
                char ls[32];
                snprintf(ls, sizeof ls, "%u", sp->lshare);
                add_param(sl, "share_layers", ls,
                          "layers sharing one selection (1: none; 2: layers 2k and 2k+1)", NULL, 1,
                          2, 1);
                add_param(sl, "share_from", def, "the first layer a shared selection starts at",
                          NULL, 2, 2, 1);
            }
        } else if ((rc = read_word(r, v, "share", shw, &sp->share_all))) {
            return rc;
        }
    }
    sp->rmode = R_FIXED;
    if ((v = yx_map_get(root, "kv_budget"))) {
        static const char *const kb[] = {"recent", NULL};
        const yx_node *x;
        if ((rc = need_keys(r, v, "kv_budget", kb)))
            return rc;
        if ((x = yx_map_get(v, "recent"))) {
            if (x->kind == YX_SCALAR && !strcmp(x->str, "fixed")) {
                sp->rmode = R_FIXED;
            } else if (x->kind == YX_SCALAR && !strcmp(x->str, "rest")) {
                sp->rmode = R_REST;
            } else {
                if ((rc = read_num(r, x, "kv_budget.recent", 0, 1, 0, def, sizeof def)))
                    return rc;
                sp->rmode = R_SHARE;
                sp->rshare = atof(def);
            }
        }
    }
    /* the parameters kv_budget replaces */
    static const char *const bk[] = {"topk",         "topk_ratio",       "capacity",
                                     "min_units",    "dense_layers",     "ratio1",
                                     "static_ratio", "static_threshold", NULL};
    sl->budget_keys[0] = '\0';
    for (size_t i = 0; i < sl->ops.n_params; i++) {
        const char *key = sl->params[i].key;
        int is = sp->rmode != R_FIXED && (!strcmp(key, "recent") || !strcmp(key, "recent_ratio"));
        for (size_t k = 0; bk[k] && !is; k++)
            is = !strcmp(bk[k], key);
        if (is)
            snprintf(sl->budget_keys + strlen(sl->budget_keys),
                     sizeof sl->budget_keys - strlen(sl->budget_keys), "%s%s",
                     sl->budget_keys[0] ? "|" : "", key);
    }
    return MS_OK;
}

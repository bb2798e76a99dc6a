/* compose_int.h — what the composition engine's files share (compose.c: runs, costs, loading;
 * compose_read.c: reading a composition file). */
#ifndef MPCSIM_COMPOSE_INT_H
#define MPCSIM_COMPOSE_INT_H

#include <limits.h>

#include "compose.h"
#include "protocols/base/yamlx.h"

enum { SC_NONE, SC_ATT, SC_WINDOW, SC_KEYNORM, SC_BOUNDS, SC_RANDOM, SC_CLUSTER };
enum { W_ONCE, W_STEP };
enum { R_FIXED, R_REST, R_SHARE };    /* what kv_budget does to the recent window */
enum { K_NONE, K_TOPK, K_THRESHOLD }; /* the selection block */
enum { KT_TOKENS, KT_RATIO, KT_CAP }; /* how the top-k count is given */

static const char *const score_names[] = {
    "none", "attention", "window_attention", "key_norm", "page_bounds", "random", "cluster_bounds"};

/* A file as read: the blocks and the parameters they expose. */
typedef struct cspec {
    int score, when, permanent, sel, ktype, rmode, share_all, has_recent, recent_ratio;
    int maxpool, pyramid, att_last; /* att_last: the newest row's attention, not accumulated */
    uint32_t every, page, lshare;   /* lshare: layers sharing one selection */
    double rshare;
    /* cluster granularity (compose_cluster.c): cluster size, levels (1 or 2), the static
     * block's mode (0 threshold, 1 topk, 2 none: mpcache_shape.static_mode), the first layer a
     * layer share applies from */
    int cluster, levels, stat_mode;
    uint32_t csize, lfrom;
} cspec;

#define CP_MAX 16

typedef struct cslot {
    policy_ops ops; /* first: a policy_ops pointer is the slot's */
    cspec sp;
    char path[PATH_MAX], real[PATH_MAX];
    char name[32], summary[200], budget_keys[160];
    char defs[CP_MAX][32];
    policy_param params[CP_MAX];
} cslot;

/* A composition file being read: its path and where errors go. */
typedef struct rd {
    const char *path;
    errbuf *e;
} rd;

/* A file error at node at (or 1:1): `path:line:col: error: …` and the hint below it. */
int compose_rfail(rd *r, const yx_node *at, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The blocks and parameters of a composition file's root into sl (name, summary, params). */
int compose_read_spec(rd *r, const yx_node *root, cslot *sl);

/* The cluster blocks' run (compose_cluster.c): its state from the slot's parameters, and the
 * callbacks of a composition with cluster granularity. */
int compose_cluster_init(const cslot *sl, const policy_env *env, const policy_args *a, void **st,
                         errbuf *e);
void compose_cluster_ops(policy_ops *ops);
/* The rules between a cluster composition's parameters (policy_ops.check). */
int compose_cluster_check(const cslot *sl, const policy_args *a, errbuf *e);

/* A composition of H2O's shape (attention accumulated per KV head, a recent window, a top-k
 * at every step evicting for good, one selection per KV head; also accumulated one per layer,
 * `share: layer`, and the newest row per KV head: h2o_shape.shared, .last): its selection on
 * shares is H2O's secure session fed with its budgets (compose_h2o.c), its sinks public rows
 * before the candidates (h2o_shape.sinks), its dense layers (`layers: {dense: N}`) layers that
 * select nothing (h2o_shape.dense). compose_h2o_budgets (compose.c) gives them from a state of the
 * composition, or 0 with why set when its parameters leave that shape (every layer dense,
 * pages, a pyramid). */
int compose_h2o_shaped(const cspec *sp);
void compose_h2o_ops(policy_ops *ops);
int compose_h2o_budgets(const void *st, uint32_t *sinks, uint32_t *heavy, uint32_t *recent,
                        uint32_t *dense, char *why, size_t cap);

/* A composition of TOVA's shape (the newest query's attention, one selection per layer, a top-k
 * at every step evicting for good): its selection on shares is tova's emitted ops run in the
 * session (secpol_emit.c) with its budget as cache_size (compose_tova.c). compose_tova_budget
 * (compose.c) gives it, its dense layers, sinks and recent window (tova's dense_layers, sinks,
 * recent) from a state of the composition, or 0 with why set when its parameters leave that
 * shape (every layer dense, pages, a pyramid). */
int compose_tova_shaped(const cspec *sp);
void compose_tova_ops(policy_ops *ops);
int compose_tova_budget(const void *st, uint32_t *cap, uint32_t *dense, uint32_t *sinks,
                        uint32_t *recent, char *why, size_t n);

/* A key-norm composition in token units with real operands (compose_keynorm.c): a top-k at
 * every step, every N steps or once after the prompt, per KV head or one per layer (shared);
 * compose.c gives its budget at the last selecting position at (the prompt when once): k of
 * the candidates [c0, c1), M their largest score (a KV head's, or shared the heads' sum). */
typedef struct compose_kn {
    const policy_env *env;
    int shared, once;
    uint32_t every, at, k, c0, c1;
    double M;
    uint32_t lead; /* the layer whose selection it uses (share: {layers: N}) */
    int group;     /* a selection shared across layers: the leader's one-hot put in state */
} compose_kn;
int compose_keynorm_emit(const compose_kn *kn, int phase, uint32_t layer, uint32_t kv_len,
                         op_program *prog, const char *name, errbuf *e);

/* Key norms with real operands (compose_keynorm.c). compose_key_norms: the t new keys' squared
 * norms (squares, their sum by a product with public ones: local) written at row r0 of the
 * carried state "cmp.norm" (Hkv, max_len, 1), which it returns. compose_keynorm_select: the
 * decode step's top-k of the candidates [c0, c1) of that state, per KV head or (shared) one per
 * layer of the KV heads' sums, and the gather of their cached [K | V] rows named as the
 * selection; M: the largest candidate score (a KV head's, or shared the sum's); lead: its one-hot
 * rows and scores also put into state for the layers sharing its selection (compose_lead_put). */
uint32_t compose_key_norms(opb *b, uint32_t Hkv, uint32_t d, uint32_t max_len, uint32_t t,
                           uint32_t r0);
void compose_keynorm_select(opb *b, uint32_t nst, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                            uint32_t c0, uint32_t c1, uint32_t k, int shared, int carry, double M,
                            int lead);
/* Pages of S (key_norm summed per page): the candidates [c0, c1) of the norms state nst summed
 * over each page [⌊c0 / S⌋, ⌈c1 / S⌉), the entries outside them zero: a row (Hkv, 1, pages). */
uint32_t compose_keynorm_pages(opb *b, uint32_t nst, uint32_t Hkv, uint32_t c0, uint32_t c1,
                               uint32_t S);
/* With `when: {every: N}` (carry: the rows also into the state "cmp.kept"), a step between
 * selections names that state, the rows of the candidates [c0, c1) of the last selection
 * (shared: ranked by the KV heads' summed norms). */
void compose_keynorm_kept(opb *b, uint32_t nst, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                          uint32_t c0, uint32_t c1, uint32_t k, int shared, double M);
/* Key norms selected once after the prompt (`when: once`) per KV head: at the prompt its keys'
 * squared norms, the top k of the candidates [c0, c1) and the gather of their rows into state;
 * at a decode step (kv_len cached) those rows named as the selection. M, lead: as above. */
void compose_keynorm_once(opb *b, int phase, uint32_t Hkv, uint32_t d, uint32_t kv_len, uint32_t c0,
                          uint32_t c1, uint32_t k, double M, int lead);
/* The same with one selection per layer (`share: layer`): at the prompt its keys' squared
 * norms into the state "cmp.norm" (Hkv, max_len, 1), one top-k of the candidates' sums over
 * the KV heads and each KV head's rows gathered by it into state; at a decode step those rows
 * named as the selection, ranked by the prompt's summed norms. lead: the leader of a group also
 * puts the one-hot rows (as each KV head's) into its state for the later layers.
 * compose_keynorm_once_follow: a later layer of such a group, its own prompt rows gathered by
 * them into its state, named at each decode step ranked by its leader's summed norms. */
void compose_keynorm_once_shared(opb *b, int phase, uint32_t Hkv, uint32_t d, uint32_t max_len,
                                 uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double M,
                                 int lead);
void compose_keynorm_once_follow(opb *b, int phase, uint32_t lead, uint32_t Hkv, uint32_t d,
                                 uint32_t max_len, uint32_t kv_len, uint32_t c0, uint32_t c1,
                                 uint32_t k, double M);

/* The tie bound of a selection by key norms of M the largest candidate score (a KV head's, or
 * shared the KV heads' sum of Hkv norms): compose_keynorm.c states its derivation. */
double compose_keynorm_tol(uint32_t Hkv, uint32_t d, int shared, double M);

/* A selection shared across layers (`share: {layers: N}`, compose_shlay.c): the group's first
 * layer (its leader) selects; compose_lead_put, in its program (b's layer), puts its one-hot
 * rows oh (Hkv, k, nu; OP_NONE: none) and the nu candidates' scores row (Hkv × nu; OP_NONE: none)
 * they ranked
 * into state of its layer's name; compose_follow_rows, in a later layer's program of the same
 * step, gathers that layer's own cached [K | V] rows of the candidates [c0, c1) by the leader's
 * one-hot rows and names them as its selection (the leader's scores, tol, for the ties; carry:
 * the rows also into its state "cmp.kept", as compose_keynorm_select's). compose_page_select:
 * page_select in the leader's program (its state put when group), page_gather of its one-hot
 * rows in a follower's (row unused). compose_follow_once: a selection made once at the prompt
 * (snap_select_emit's, the leader's one-hot rows put by compose_lead_put): at the prompt its
 * own rows gathered by them into its state "snap.kept", at a decode step those rows named as
 * its selection with the leader's scores ("snap.score_kept"). compose_lead_norms: the leader's
 * key norms state ("cmp.norm", Hkv × max_len). */
void compose_lead_put(opb *b, uint32_t oh, uint32_t row, uint32_t Hkv, uint32_t k, uint32_t nu);
/* The leader's state nm (B, R, C) as named in this program (b's). */
uint32_t compose_lead_state(opb *b, uint32_t lead, const char *nm, uint32_t B, uint32_t R,
                            uint32_t C);
void compose_follow_rows(opb *b, uint32_t lead, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                         uint32_t c0, uint32_t c1, uint32_t k, int carry, double tol);
void compose_follow_once(opb *b, int phase, uint32_t lead, uint32_t Hkv, uint32_t d2,
                         uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double tol);
uint32_t compose_lead_norms(opb *b, uint32_t lead, uint32_t Hkv, uint32_t max_len);
void compose_page_select(opb *b, uint32_t lead, int group, uint32_t row, uint32_t H, uint32_t Hkv,
                         uint32_t c0, uint32_t u1, uint32_t k, uint32_t S, uint32_t d, uint32_t c1,
                         uint32_t kv_len, double tol);

/* The pyramid's top-k entries of layer l of L (compose_score.c; UINT32_MAX: none). */
uint32_t compose_pyramid_k(int64_t P, int64_t C, int64_t w, int64_t beta, int64_t L, int64_t l);

/* Key norms evicting for good (`evict: permanent`) per KV head on tokens, with real operands
 * (compose_knperm.c): H2O's table of k kept rows [K | V | norm] in state, an eviction of the
 * least of k + 1 norms and a compaction at every decode step past the prompt. kn: the budget
 * at the prompt (k of the candidates [c0, c1), c1 = P − recent, more than k of them), M. */
int compose_knperm_emit(const compose_kn *kn, int phase, uint32_t layer, uint32_t kv_len,
                        op_program *prog, const char *name, errbuf *e);

/* Key norms in pages (compose_pages.c, page_ops.h): the candidates [c0, c1) of the
 * norms nst summed per page of S (the rows outside them zero; local), (Hkv, 1, pages); the tie
 * bound of such a page score (M: the largest candidate norm). */
uint32_t compose_keynorm_pages(opb *b, uint32_t nst, uint32_t Hkv, uint32_t c0, uint32_t c1,
                               uint32_t S);
double compose_keynorm_page_tol(uint32_t d, uint32_t S, double M);

/* The sinks, top-k and recent window of a selection over some cached count (compose.c budget). */
typedef struct compose_att_budget {
    uint32_t sinks, k, recent;
} compose_att_budget;

/* A threshold (`select: {threshold: X}`) on key norms of tokens or pages (at every decode step,
 * once after the prompt, or every N steps), on page bounds (at every step or every N), on
 * attention of tokens (at every step, once or every N), or on window votes of tokens once after
 * the prompt (where the candidates end inside the voted entries), per KV head or (`share: layer`)
 * per layer, shared across layers or not, on real operands (compose_thr.c): the scores compared
 * with the public threshold on shares, every candidate's row attended, a dropped one's attention
 * score biased out (no kept count opened). compose_thr_shaped: its blocks; compose_thr_emit: the
 * ops of a layer and phase at kv_len cached entries. */
typedef struct compose_thr {
    const policy_env *env;
    int score;               /* SC_KEYNORM, SC_BOUNDS or SC_ATT */
    int shared;              /* one selection per layer (the KV heads' scores summed) */
    int once;                /* when: once (else every `every` decode steps) */
    int last;                /* attention: the newest row's, not accumulated */
    uint32_t window, kernel; /* window votes: the voting queries, the pooling kernel */
    int maxpool;             /* window votes: max (else average) pooling */
    uint32_t every;          /* selecting every N decode steps (1: every step) */
    /* select()'s sinks and window of layer over T cached entries, whose candidates a selection
     * made at T ranks (changing with T under a kv_budget fraction) */
    const void *st;
    void (*budget)(const void *st, uint32_t layer, uint32_t T, compose_att_budget *u);
    uint32_t S, max_pages; /* the page size, pages of max_len */
    double thr;
    const float *norms; /* the layer's carried scores, Hkv × max_len (the tie bound) */
    double qmax, kmax;  /* page bounds: the step's largest |query| and |key| element */
    /* a selection shared across layers (`share: {layers: N}`): the group's first layer, whose
     * norms (or units' scores, or attention scores) and decisions (state) a later layer names
     * its own rows with; group: the first layer of a group keeps them as state at every step */
    uint32_t lead;
    int group;
    int gone; /* evicting for good by scores that move (the newest row, pages): the dropped
               * entries carried as state, an entry once dropped never kept again */
} compose_thr;
int compose_thr_shaped(const cspec *sp);
int compose_thr_emit(const compose_thr *t, int phase, uint32_t layer, uint32_t kv_len,
                     op_program *prog, const char *name, errbuf *e);

/* The random block's score (compose_score.c): a uniform number in [0, 1) from (seed, layer,
 * head, position) (splitmix64). The window votes' pooling is snapkv's (snap_pool1d), the page
 * bound score quest's (page_bound_score). */
float compose_rnd(uint64_t seed, uint32_t l, uint32_t g, uint32_t j);

/* The KV heads' rows x (Hkv, 1, n) of a score summed: a new row nm (1, 1, n), one selection per
 * layer (`share: layer`) — a transposition and a product with public ones, local (compose_score.c;
 * its temporaries named after nm). */
uint32_t compose_heads_sum(opb *b, uint32_t x, uint32_t Hkv, uint32_t n, const char *nm);

/* An attention-scored token composition re-selecting at every step (accumulated, or the newest
 * row's: last) or every N steps, per KV head or one per layer of every head's scores summed (a
 * pyramid: each layer its count), with a recent window and sinks (public rows before the
 * candidates): its ops on real operands (compose_att.c), the selection of step T made at the step
 * before from the scores select() ranks. compose_att_shaped: its blocks. budget: select()'s sinks,
 * window and top-k of layer over T cached entries (compose.c budget), changing with T where frac (a
 * kv_budget fraction). */
typedef struct compose_att {
    const policy_env *env;
    const void *st;
    uint32_t layer;
    void (*budget)(const void *st, uint32_t layer, uint32_t T, compose_att_budget *u);
    int last, frac, shared; /* shared: one selection per layer (`share: layer`) */
    uint32_t every;
    const float *score; /* the layer's carried scores, Hkv × max_len (the tie bound's) */
    /* compose_att_setup's, for one step: the budget of the selection it attends (cur: select()'s
     * at position at, the step's kv_len or with every N the last selecting step's, every entry
     * cached since kept) and of the one it makes (nxt: at kv_len + 1, at the prompt the first
     * step's; picks: whether the next step selects) */
    compose_att_budget cur, nxt;
    uint32_t at;
    int picks;
    uint32_t lead; /* the layer whose selection it uses (share: {layers: N}): layer */
    int group;     /* a selection shared across layers: the leader's one-hot put in state */
} compose_att;
/* Sets a up for the step at kv_len T (pre: the prompt's); 0 where a budget does not fit at some
 * cached count from the prompt on (no window, or no top-k below the candidates): then the
 * composition keeps the replay's kept sets. */
int compose_att_setup(compose_att *a, uint32_t T, int pre);
int compose_att_shaped(const cspec *sp);
int compose_att_emit(const compose_att *a, int phase, uint32_t layer, uint32_t kv_len,
                     op_program *prog, const char *name, errbuf *e);
/* policy_ops.choice of select()'s kept rows alive (Hkv rows max_len apart) at position pos: each
 * step's top-k decides which entries the next step's attention sees, so a tie its ops broke
 * otherwise is carried into select()'s later scores; adopt: kept (Hkv rows of pos) into layer's
 * rows of alive ([L][Hkv][max_len]), sel_at[layer] pos + 1 (select() returns them at pos). */
int compose_att_choice(const compose_att *a, const uint8_t *alive, uint32_t pos, policy_choice *c);
void compose_att_adopt(const policy_env *v, uint8_t *alive, uint32_t *sel_at, uint32_t layer,
                       const uint8_t *kept, uint32_t pos);

#endif

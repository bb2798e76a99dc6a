/* plugin.c — loading out-of-tree policies (plugin.h) and serving them as policy_ops.
 *
 * Design. The plug-in sees only include/mpcsim/policy_plugin.h: opaque handles, plain shapes,
 * and a table of mpcsim's functions passed to its entry point, so it links against nothing of
 * mpcsim and mpcsim need not export its symbols (the shape of SQLite's loadable extensions:
 * sqlite3ext.h's sqlite3_api_routines, handed to sqlite3_extension_init; and of Redis modules'
 * API version argument, checked by RedisModule_Init in src/redismodule.h). Each loaded plug-in
 * gets an adapter policy_ops whose callbacks convert the handles and call the plug-in's. */
#include "plugin.h"
#include "include/mpcsim/policy_plugin.h"
#include "pcheck.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The public numbers are the private ones. */
_Static_assert((int)(MPCSIM_OP_INPUT) == (int)OP_INPUT &&
                   (int)(MPCSIM_OP_SQUARE) == (int)OP_SQUARE &&
                   (int)(MPCSIM_OP_MATMUL) == (int)OP_MATMUL &&
                   (int)(MPCSIM_OP_TOPK) == (int)OP_TOPK &&
                   (int)(MPCSIM_OP_GATHER) == (int)OP_GATHER &&
                   (int)(MPCSIM_OP_VIEW) == (int)OP_VIEW &&
                   (int)(MPCSIM_OP_VIEW + 1) == (int)OP_N_KINDS,
               "op kinds of policy_plugin.h and op.h differ");
_Static_assert((int)(MPCSIM_OP_MAX) == (int)OP_MAX && (int)(MPCSIM_OP_LT) == (int)OP_LT &&
                   (int)(MPCSIM_OP_SORT) == (int)OP_SORT &&
                   (int)(MPCSIM_OP_ONEHOT) == (int)OP_ONEHOT &&
                   (int)(MPCSIM_OP_REVEAL) == (int)OP_REVEAL,
               "op kinds of policy_plugin.h and op.h differ");
_Static_assert((int)(MPCSIM_OPF_FIXED_B) == (int)OPF_FIXED_B &&
                   (int)(MPCSIM_OPF_PUBLIC_B) == (int)OPF_PUBLIC_B &&
                   (int)(MPCSIM_OPF_NO_TRUNC) == (int)OPF_NO_TRUNC &&
                   (int)(MPCSIM_OPF_TRANS_B) == (int)OPF_TRANS_B,
               "op flags of policy_plugin.h and op.h differ");
_Static_assert((int)(MPCSIM_ROLE_TEMP) == (int)OPT_TEMP &&
                   (int)(MPCSIM_ROLE_CACHE) == (int)OPT_CACHE &&
                   (int)(MPCSIM_ROLE_PUBLIC) == (int)OPT_PUBLIC &&
                   (int)(MPCSIM_ROLE_OUTPUT + 1) == (int)OPT_N_ROLES,
               "tensor roles of policy_plugin.h and op.h differ");
_Static_assert((long)(MPCSIM_PAD_BIAS) == (long)(PCHECK_PAD_BIAS),
               "the padding bias of policy_plugin.h and pcheck.h differ");
_Static_assert((int)(MPCSIM_PHASE_PREFILL) == (int)PHASE_PREFILL &&
                   (int)(MPCSIM_PHASE_DECODE) == (int)PHASE_DECODE,
               "phases of policy_plugin.h and op.h differ");
_Static_assert(MPCSIM_NEED_ATT == POLICY_NEED_ATT && MPCSIM_NEED_K == POLICY_NEED_K &&
                   MPCSIM_NEED_V == POLICY_NEED_V && MPCSIM_NEED_FFN == POLICY_NEED_FFN &&
                   MPCSIM_NEED_WO == POLICY_NEED_WO && MPCSIM_NEED_Q == POLICY_NEED_Q,
               "observation needs of policy_plugin.h and policy.h differ");
_Static_assert((int)(MPCSIM_IN_KV) == (int)PCHECK_IN_KV &&
                   (int)(MPCSIM_IN_KEYS_NEW) == (int)PCHECK_IN_KEYS_NEW &&
                   (int)(MPCSIM_IN_QUERY) == (int)PCHECK_IN_QUERY &&
                   (int)(MPCSIM_IN_N) == (int)PCHECK_IN_N,
               "operands of policy_plugin.h and pcheck.h differ");
_Static_assert(sizeof(mpcsim_metric) == sizeof(run_metric) &&
                   offsetof(mpcsim_metric, value) == offsetof(run_metric, value) &&
                   offsetof(mpcsim_metric, unit) == offsetof(run_metric, unit),
               "mpcsim_metric and run_metric differ");

_Static_assert(sizeof(mpcsim_choice) == sizeof(policy_choice) &&
                   offsetof(mpcsim_choice, head_stride) == offsetof(policy_choice, head_stride) &&
                   offsetof(mpcsim_choice, score) == offsetof(policy_choice, score) &&
                   offsetof(mpcsim_choice, kept) == offsetof(policy_choice, kept) &&
                   offsetof(mpcsim_choice, tol) == offsetof(policy_choice, tol),
               "mpcsim_choice and policy_choice differ");

/* The handles behind the opaque types. */
struct mpcsim_err {
    errbuf e;
};
struct mpcsim_args {
    const policy_ops *p;
    const policy_args *a;
    uint32_t prompt_len; /* for the common rule of kv_budget (0: unknown, at check) */
};
struct mpcsim_opb {
    opb b;
    uint32_t n_heads, n_kv_heads, head_dim, kv_len;
};

#define PARAMS_MAX 48 /* a plug-in's own parameters (the schema adds the replay's) */

typedef struct plug {
    policy_ops ops; /* the adapter (first: a policy_ops pointer is the plug's) */
    const mpcsim_policy *mp;
    void *dl;
    char path[PATH_MAX];
    char real[PATH_MAX];
    char name[32];
    char prefix[40]; /* "<name>." for tensor names */
    policy_param params[PARAMS_MAX];
    char budget[256]; /* budget_keys and budget_count, '|'-separated (ABI 1.1) */
} plug;

typedef struct pstate {
    const plug *pl;
    void *st;
    mpcsim_env env;
} pstate;

static plug *plugs[POLICY_PLUGIN_MAX];
static const policy_ops *plug_ops[POLICY_PLUGIN_MAX];
static size_t n_plugs;
static pthread_mutex_t plugs_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the function table ------------------------------------------------------------------ */

static int api_fail(mpcsim_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->e.msg, sizeof e->e.msg, fmt, ap);
    va_end(ap);
    return MS_ERR_INPUT;
}

static int api_arg_double(const mpcsim_args *a, const char *key, double *out, mpcsim_err *e)
{
    return policy_arg_double(a->p, a->a, key, out, &e->e);
}

static const plug *plug_of(const policy_ops *p); /* below */

static int api_arg_u32(const mpcsim_args *a, const char *key, uint32_t *out, mpcsim_err *e)
{
    const plug *pl = plug_of(a->p);
    const char *cnt = pl && pl->mp->abi_minor >= 1 ? pl->mp->budget_count : NULL;
    if (cnt && a->prompt_len && !strcmp(key, cnt)) { /* the common rule of kv_budget */
        double f;
        int rc = policy_kv_budget(a->p, a->a, &f, &e->e);
        if (rc)
            return rc;
        if (f > 0) {
            *out = policy_budget_entries(f, a->prompt_len);
            return MS_OK;
        }
    }
    return policy_arg_u32(a->p, a->a, key, out, &e->e);
}

static int api_kv_budget(const mpcsim_args *a, double *f, mpcsim_err *e)
{
    return policy_kv_budget(a->p, a->a, f, &e->e);
}

static const char *api_at(const mpcsim_args *a, const char *key, char *buf, size_t cap)
{
    return policy_at(a->a, key, buf, cap);
}

static uint32_t api_input(mpcsim_opb *b, int what, uint32_t rows)
{
    uint32_t B = b->n_kv_heads, cols = b->head_dim;
    if (what == MPCSIM_IN_KV)
        cols = 2 * b->head_dim;
    else if (what == MPCSIM_IN_QUERY)
        B = b->n_heads, rows = 1;
    return pcheck_input(&b->b, what, B, rows, cols);
}

static void api_selection(mpcsim_opb *b, uint32_t rows, uint32_t m, uint32_t r0, uint32_t r1,
                          uint32_t score, double tol)
{
    pcheck_selection(&b->b, rows, m, r0, r1, score, tol);
}

static void api_selection_bias(mpcsim_opb *b, uint32_t bias) { pcheck_selection_bias(&b->b, bias); }

static void api_selection_stage(mpcsim_opb *b, uint32_t mask)
{
    pcheck_selection_stage(&b->b, mask);
}

static size_t api_topk(const float *score, size_t n, size_t k, uint32_t *out, uint32_t *work)
{
    return policy_topk(score, NULL, n, k, out, work);
}

static uint32_t api_tensor(mpcsim_opb *b, const char *nm, int role, uint32_t batch, uint32_t rows,
                           uint32_t cols)
{
    if (role < 0 || role >= OPT_N_ROLES) {
        b->b.failed = 1;
        return OP_NONE;
    }
    return opb_tensor(&b->b, nm, (op_role)role, batch, rows, cols);
}

static uint32_t api_shared(mpcsim_opb *b, const char *nm, int role, uint32_t batch, uint32_t rows,
                           uint32_t cols)
{
    if (role < 0 || role >= OPT_N_ROLES) {
        b->b.failed = 1;
        return OP_NONE;
    }
    return opb_shared(&b->b, nm, (op_role)role, batch, rows, cols);
}

static uint32_t api_op(mpcsim_opb *b, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n,
                       uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                       int32_t iarg, double farg)
{
    if (kind < 0 || kind >= OP_N_KINDS) {
        b->b.failed = 1;
        return OP_NONE;
    }
    return opb_op(&b->b, kind, batch, m, k, n, in0, in1, in2, out, flags, iarg, farg);
}

static uint32_t api_rows(mpcsim_opb *b, uint32_t x, uint32_t B, uint32_t r0, uint32_t n, uint32_t C,
                         const char *nm)
{
    return opb_rows(&b->b, x, B, r0, n, C, nm);
}

static void api_put(mpcsim_opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n,
                    uint32_t C)
{
    opb_put(&b->b, x, out, B, r0, n, C);
}

static uint32_t api_transpose(mpcsim_opb *b, uint32_t x, uint32_t B, uint32_t R, uint32_t C,
                              const char *nm)
{
    return opb_transpose(&b->b, x, B, R, C, nm);
}

static uint32_t api_matmul_pub(mpcsim_opb *b, uint32_t x, uint32_t pub, uint32_t M, uint32_t k,
                               uint32_t n, uint32_t out)
{
    return opb_matmul_pub(&b->b, x, pub, M, k, n, out);
}

static uint32_t api_colsum(mpcsim_opb *b, uint32_t oh, uint32_t B, uint32_t k, uint32_t n,
                           const char *nm)
{
    return opb_colsum(&b->b, oh, B, k, n, nm);
}

static int api_failed(const mpcsim_opb *b) { return opb_failed(&b->b); }

static const mpcsim_api api = {
    .abi_major = MPCSIM_PLUGIN_ABI_MAJOR,
    .abi_minor = MPCSIM_PLUGIN_ABI_MINOR,
    .fail = api_fail,
    .arg_double = api_arg_double,
    .arg_u32 = api_arg_u32,
    .topk = api_topk,
    .tensor = api_tensor,
    .shared = api_shared,
    .op = api_op,
    .rows = api_rows,
    .put = api_put,
    .transpose = api_transpose,
    .matmul_pub = api_matmul_pub,
    .colsum = api_colsum,
    .failed = api_failed,
    .kv_budget = api_kv_budget,
    .budget_entries = policy_budget_entries,
    .at = api_at,
    .input = api_input,
    .selection = api_selection,
    .selection_bias = api_selection_bias,
    .selection_stage = api_selection_stage,
};

/* ---- the adapter ------------------------------------------------------------------------- */

/* A plug-in's message, or a generic one when it left none. */
static int plug_rc(const plug *pl, int rc, const char *what, errbuf *e)
{
    if (rc && !e->msg[0])
        err_set(e, MS_ERR_INPUT, "policy %s (%s): %s failed", pl->name, pl->path, what);
    return rc;
}

static int plug_init_at(size_t slot, const policy_env *env, const policy_args *a, void **st,
                        errbuf *e)
{
    const plug *pl = plugs[slot];
    pstate *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", pl->name);
    s->pl = pl;
    mpcsim_env me = {env->n_layers, env->n_heads, env->n_kv_heads, env->head_dim,
                     env->dim,      env->ffn_dim, env->prompt_len, env->max_len};
    s->env = me;
    struct mpcsim_args ma = {&pl->ops, a, env->prompt_len};
    e->msg[0] = '\0';
    int rc = pl->mp->init(&me, &ma, &s->st, (mpcsim_err *)e);
    if (rc) {
        free(s);
        return plug_rc(pl, rc, "init", e);
    }
    *st = s;
    return MS_OK;
}

/* init receives no ops pointer: one entry per slot names the plug-in. */
#define PLUG_INIT(i)                                                                            \
    static int plug_init_##i(const policy_env *env, const policy_args *a, void **st, errbuf *e) \
    {                                                                                           \
        return plug_init_at(i, env, a, st, e);                                                  \
    }
PLUG_INIT(0)
PLUG_INIT(1)
PLUG_INIT(2)
PLUG_INIT(3)
PLUG_INIT(4)
PLUG_INIT(5)
PLUG_INIT(6)
PLUG_INIT(7)
PLUG_INIT(8)
PLUG_INIT(9)
PLUG_INIT(10)
PLUG_INIT(11)
PLUG_INIT(12)
PLUG_INIT(13)
PLUG_INIT(14)
PLUG_INIT(15)
static int (*const plug_inits[POLICY_PLUGIN_MAX])(const policy_env *, const policy_args *, void **,
                                                  errbuf *) = {
    plug_init_0,  plug_init_1,  plug_init_2,  plug_init_3,  plug_init_4,  plug_init_5,
    plug_init_6,  plug_init_7,  plug_init_8,  plug_init_9,  plug_init_10, plug_init_11,
    plug_init_12, plug_init_13, plug_init_14, plug_init_15,
};

/* The plug-in's check hook (ABI 1.1), one entry per slot as init. */
static int plug_check_at(size_t slot, const policy_args *a, errbuf *e)
{
    const plug *pl = plugs[slot];
    struct mpcsim_args ma = {&pl->ops, a, 0};
    e->msg[0] = '\0';
    return plug_rc(pl, pl->mp->check(&ma, (mpcsim_err *)e), "check", e);
}

#define PLUG_CHECK(i) \
    static int plug_check_##i(const policy_args *a, errbuf *e) { return plug_check_at(i, a, e); }
PLUG_CHECK(0)
PLUG_CHECK(1)
PLUG_CHECK(2)
PLUG_CHECK(3)
PLUG_CHECK(4)
PLUG_CHECK(5)
PLUG_CHECK(6)
PLUG_CHECK(7)
PLUG_CHECK(8)
PLUG_CHECK(9)
PLUG_CHECK(10)
PLUG_CHECK(11)
PLUG_CHECK(12)
PLUG_CHECK(13)
PLUG_CHECK(14)
PLUG_CHECK(15)
static int (*const plug_checks[POLICY_PLUGIN_MAX])(const policy_args *, errbuf *) = {
    plug_check_0,  plug_check_1,  plug_check_2,  plug_check_3,  plug_check_4,  plug_check_5,
    plug_check_6,  plug_check_7,  plug_check_8,  plug_check_9,  plug_check_10, plug_check_11,
    plug_check_12, plug_check_13, plug_check_14, plug_check_15,
};

static void plug_fini(void *st)
{
    pstate *s = st;
    if (!s)
        return;
    if (s->pl->mp->fini)
        s->pl->mp->fini(s->st);
    free(s);
}

static unsigned plug_needs(void *st, uint32_t pos)
{
    pstate *s = st;
    return s->pl->mp->needs ? s->pl->mp->needs(s->st, pos) : 0;
}

static int plug_observe(void *st, const policy_obs *o, errbuf *e)
{
    pstate *s = st;
    mpcsim_obs mo = {o->layer, o->pos, o->q, o->k, o->v, o->att, o->ffn, o->wo};
    e->msg[0] = '\0';
    return plug_rc(s->pl, s->pl->mp->observe(s->st, &mo, (mpcsim_err *)e), "observe", e);
}

static int plug_prefill(void *st, errbuf *e)
{
    pstate *s = st;
    e->msg[0] = '\0';
    return plug_rc(s->pl, s->pl->mp->prefill(s->st, (mpcsim_err *)e), "prefill", e);
}

static int plug_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                       errbuf *e)
{
    pstate *s = st;
    e->msg[0] = '\0';
    return plug_rc(s->pl, s->pl->mp->select(s->st, layer, pos, q, keep, (mpcsim_err *)e), "select",
                   e);
}

static int plug_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                     op_program *prog, errbuf *e)
{
    pstate *s = st;
    struct mpcsim_opb b = {.n_heads = s->env.n_heads,
                           .n_kv_heads = s->env.n_kv_heads,
                           .head_dim = s->env.head_dim,
                           .kv_len = kv_len};
    opb_init(&b.b, prog, phase, (int)layer, OPC_POLICY, s->pl->prefix);
    e->msg[0] = '\0';
    int rc = s->pl->mp->emit_cost(s->st, phase, layer, kv_len, kept, &b, (mpcsim_err *)e);
    if (rc)
        return plug_rc(s->pl, rc, "emit_cost", e);
    if (opb_failed(&b.b))
        return err_set(e, MS_ERR_INPUT,
                       "policy %s (%s): its ops for layer %u did not build (out of memory, a bad "
                       "op kind or role, or an op on a tensor that failed)",
                       s->pl->name, s->pl->path, layer);
    return MS_OK;
}

/* The choice and adopt hooks (ABI 1.3). */
static int plug_choice(void *st, uint32_t layer, uint32_t pos, uint32_t stage, policy_choice *c)
{
    pstate *s = st;
    return s->pl->mp->choice(s->st, layer, pos, stage, (mpcsim_choice *)c) == 1;
}

static int plug_adopt(void *st, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                      errbuf *e)
{
    pstate *s = st;
    e->msg[0] = '\0';
    return plug_rc(s->pl, s->pl->mp->adopt(s->st, layer, pos, stage, kept, (mpcsim_err *)e),
                   "adopt", e);
}

static size_t plug_metrics(void *st, run_metric *out, size_t max)
{
    pstate *s = st;
    return s->pl->mp->metrics(s->st, (mpcsim_metric *)out, max);
}

/* ---- loading ----------------------------------------------------------------------------- */

int policy_plugin_is_path(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 3 && !strcmp(s + n - 3, ".so");
}

static int check_policy(const char *path, const mpcsim_policy *mp, errbuf *e)
{
    if (mp->abi_major != MPCSIM_PLUGIN_ABI_MAJOR || mp->abi_minor < 0 ||
        mp->abi_minor > MPCSIM_PLUGIN_ABI_MINOR)
        return err_set(e, MS_ERR_INPUT,
                       "%s: plug-in built against policy ABI %d.%d, and this mpcsim provides "
                       "%d.%d (the majors must be equal and the plug-in's minor at most "
                       "mpcsim's)\n  hint: rebuild it against this mpcsim's "
                       "mpcsim/policy_plugin.h (pkg-config --cflags mpcsim-plugin)",
                       path, mp->abi_major, mp->abi_minor, MPCSIM_PLUGIN_ABI_MAJOR,
                       MPCSIM_PLUGIN_ABI_MINOR);
    const char *nm = mp->name;
    size_t len = nm ? strlen(nm) : 0;
    int ok = len > 0 && len < 32;
    for (size_t i = 0; ok && i < len; i++)
        ok = (nm[i] >= 'a' && nm[i] <= 'z') || (nm[i] >= '0' && nm[i] <= '9') || nm[i] == '_';
    if (!ok)
        return err_set(e, MS_ERR_INPUT,
                       "%s: the plug-in's policy name '%s' is not 1 to 31 of [a-z0-9_]", path,
                       nm ? nm : "(null)");
    size_t nb;
    const policy_ops *const *all = policy_all(&nb);
    for (size_t i = 0; i < nb; i++)
        if (!strcmp(all[i]->name, nm))
            return err_set(e, MS_ERR_INPUT,
                           "%s: the plug-in's policy name '%s' is a built-in policy's\n"
                           "  hint: rename the plug-in's policy",
                           path, nm);
    if (!mp->init || !mp->select)
        return err_set(e, MS_ERR_INPUT, "%s: policy %s has no %s callback (required)", path, nm,
                       !mp->init ? "init" : "select");
    if (mp->n_params > PARAMS_MAX || (mp->n_params && !mp->params))
        return err_set(e, MS_ERR_INPUT, "%s: policy %s declares %zu parameters (at most %d)", path,
                       nm, mp->n_params, PARAMS_MAX);
    int count_ok = mp->abi_minor < 1 || !mp->budget_count;
    for (size_t i = 0; !count_ok && i < mp->n_params; i++)
        count_ok = !strcmp(mp->params[i].key, mp->budget_count) && mp->params[i].whole;
    if (!count_ok)
        return err_set(e, MS_ERR_INPUT,
                       "%s: policy %s: budget_count '%s' is not one of its whole-number "
                       "parameters",
                       path, nm, mp->budget_count);
    for (size_t i = 0; i < mp->n_params; i++) {
        const mpcsim_param *pp = &mp->params[i];
        if (!pp->key || !pp->key[0] || strlen(pp->key) >= sizeof(((kv_param *)0)->key) ||
            !pp->def || !(pp->lo <= pp->hi))
            return err_set(e, MS_ERR_INPUT,
                           "%s: policy %s parameter %zu needs a key (at most 47 characters), a "
                           "default and lo <= hi",
                           path, nm, i + 1);
    }
    return MS_OK;
}

static plug *plug_new(const char *path, const char *real, void *dl, const mpcsim_policy *mp,
                      size_t slot)
{
    plug *pl = calloc(1, sizeof *pl);
    if (!pl)
        return NULL;
    pl->mp = mp;
    pl->dl = dl;
    snprintf(pl->path, sizeof pl->path, "%s", path);
    snprintf(pl->real, sizeof pl->real, "%s", real);
    snprintf(pl->name, sizeof pl->name, "%s", mp->name);
    snprintf(pl->prefix, sizeof pl->prefix, "%s.", mp->name);
    for (size_t i = 0; i < mp->n_params; i++)
        pl->params[i] =
            (policy_param){mp->params[i].key, mp->params[i].def, mp->params[i].help, NULL,
                           mp->params[i].lo,  mp->params[i].hi,  mp->params[i].whole};
    int v11 = mp->abi_minor >= 1;                            /* the members of ABI 1.1 exist */
    int v13 = mp->abi_minor >= 3 && mp->choice && mp->adopt; /* and 1.3's, both given */
    if (v11 && (mp->budget_keys || mp->budget_count)) {
        snprintf(pl->budget, sizeof pl->budget, "%s%s%s", mp->budget_keys ? mp->budget_keys : "",
                 mp->budget_keys && mp->budget_count ? "|" : "",
                 mp->budget_count ? mp->budget_count : "");
    }
    pl->ops = (policy_ops){
        .name = pl->name,
        .summary = mp->summary ? mp->summary : "(plug-in)",
        .params = pl->params,
        .n_params = mp->n_params,
        .init = plug_inits[slot],
        .fini = plug_fini,
        .needs = plug_needs,
        .observe = mp->observe ? plug_observe : NULL,
        .prefill = mp->prefill ? plug_prefill : NULL,
        .select = plug_select,
        .emit_cost = mp->emit_cost ? plug_emit : NULL,
        .metrics = mp->metrics ? plug_metrics : NULL,
        .metric_stride = mp->metric_stride,
        .stateless_select = mp->stateless_select,
        .budget_keys = pl->budget[0] ? pl->budget : NULL,
        .check = v11 && mp->check ? plug_checks[slot] : NULL,
        .choice = v13 ? plug_choice : NULL,
        .adopt = v13 ? plug_adopt : NULL,
    };
    return pl;
}

int policy_plugin_load(const char *path, const policy_ops **out, errbuf *e)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return err_set(e, MS_ERR_NOTFOUND, "%s: no such plug-in file", path);
    pthread_mutex_lock(&plugs_mu);
    int rc = MS_OK;
    for (size_t i = 0; i < n_plugs; i++)
        if (!strcmp(plugs[i]->real, real)) {
            *out = &plugs[i]->ops;
            goto done;
        }
    if (n_plugs == POLICY_PLUGIN_MAX) {
        rc = err_set(e, MS_ERR_INPUT, "%s: more than %d plug-ins in one run", path,
                     POLICY_PLUGIN_MAX);
        goto done;
    }
    void *dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        rc = err_set(e, MS_ERR_INPUT, "%s: cannot load the plug-in: %s", path,
                     why ? why : "unknown reason");
        goto done;
    }
    void *sym = dlsym(dl, MPCSIM_PLUGIN_ENTRY);
    if (!sym) {
        dlclose(dl);
        rc = err_set(e, MS_ERR_INPUT,
                     "%s: not a policy plug-in: it exports no '%s'\n"
                     "  hint: define const mpcsim_policy *%s(const mpcsim_api *api) (see "
                     "mpcsim/policy_plugin.h)",
                     path, MPCSIM_PLUGIN_ENTRY, MPCSIM_PLUGIN_ENTRY);
        goto done;
    }
    mpcsim_plugin_entry entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer (POSIX) */
    const mpcsim_policy *mp = entry(&api);
    if (!mp) {
        dlclose(dl);
        rc = err_set(e, MS_ERR_INPUT, "%s: the plug-in's %s returned no policy", path,
                     MPCSIM_PLUGIN_ENTRY);
        goto done;
    }
    if ((rc = check_policy(path, mp, e))) {
        dlclose(dl);
        goto done;
    }
    for (size_t i = 0; i < n_plugs; i++)
        if (!strcmp(plugs[i]->name, mp->name)) {
            rc = err_set(e, MS_ERR_INPUT, "%s: policy name '%s' is taken by plug-in %s", path,
                         mp->name, plugs[i]->path);
            dlclose(dl); /* after the message: mp lives in the plug-in */
            goto done;
        }
    plug *pl = plug_new(path, real, dl, mp, n_plugs);
    if (!pl) {
        dlclose(dl);
        rc = err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    plugs[n_plugs] = pl;
    plug_ops[n_plugs] = &pl->ops;
    n_plugs++;
    *out = &pl->ops;
done:
    pthread_mutex_unlock(&plugs_mu);
    return rc;
}

static const plug *plug_of(const policy_ops *p)
{
    const plug *r = NULL;
    pthread_mutex_lock(&plugs_mu);
    for (size_t i = 0; i < n_plugs && !r; i++)
        if (&plugs[i]->ops == p)
            r = plugs[i];
    pthread_mutex_unlock(&plugs_mu);
    return r;
}

const policy_ops *policy_plugin_find(const char *name)
{
    const policy_ops *r = NULL;
    pthread_mutex_lock(&plugs_mu);
    for (size_t i = 0; i < n_plugs && !r; i++)
        if (!strcmp(plugs[i]->name, name))
            r = &plugs[i]->ops;
    pthread_mutex_unlock(&plugs_mu);
    return r;
}

const policy_ops *const *policy_plugin_all(size_t *n)
{
    pthread_mutex_lock(&plugs_mu);
    *n = n_plugs;
    pthread_mutex_unlock(&plugs_mu);
    return plug_ops;
}

int policy_plugin_slot(const policy_ops *p)
{
    int r = -1;
    pthread_mutex_lock(&plugs_mu);
    for (size_t i = 0; i < n_plugs && r < 0; i++)
        if (&plugs[i]->ops == p)
            r = (int)i;
    pthread_mutex_unlock(&plugs_mu);
    return r;
}

const char *policy_plugin_path(const policy_ops *p)
{
    int s = policy_plugin_slot(p);
    return s < 0 ? NULL : plugs[s]->path;
}

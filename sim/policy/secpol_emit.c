/* secpol_emit.c — the selection on secret shares of any policy whose emit_cost names its
 * operands and its selection (pcheck.h: pcheck_input, pcheck_selection; a plug-in's
 * api->input and api->selection): the same ops that `mpcsim policy check` runs on the plain
 * engine, run inside each step's program on shares.
 *
 * Per layer, the policy's program of the step (its emit_cost at the step's phase, layer and
 * cached count) is spliced into the lowered step right before the layer's attention scores,
 * its tensors renamed "L<l>.s.<name>". Its operands are bound to the session's own secret
 * tensors: the new keys are a slice of the layer's KV cache after this step's append (row 0 at
 * a decode step, rows 0 … P−1 at the prompt), the query a copy of the layer's rotated query
 * before its 1/√d scaling, and the cached [K | V] rows the table this selection carries (every
 * entry cached so far, in position order, on shares). Its state tensors (OPT_CACHE) are carried
 * on shares from step to step by name; one of no layer ("s.<name>") is one tensor of the step,
 * which every layer's spliced ops share in layer order (tova's last layer selects for every
 * layer from what each layer's ops put there). At a decode step, the rows its selection
 * gathers become the attended cache: their K and V columns (local re-layouts) appended behind
 * the new entry and the entries outside its candidates, which are attended as public ones. The
 * attended count per layer is public: the entries outside the candidates plus the selection's rows.
 * A cached rows operand longer than the cached count (whole pages) is zero past it; the policy then
 * names its gathered rows' score biases (pcheck_selection_bias: padding −4096), added to the
 * layer's scores of those rows before its softmax.
 *
 * What the program computes must depend on public values only (shapes, positions, the policy's
 * parameters): the secure form calls emit_cost with no observation, and with every cached
 * entry as the kept count of the step. Its audit: secpol_audit.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "secpol_emit_int.h"

static uint32_t step_kv(const secpol_step *st) { return st->s ? st->kv : st->t; }

/* The cached entries a decode step attends besides the new one: those outside the selection's
 * candidates [r0, r1), and its rows. */
static uint32_t attended(const pcheck_decl *io, uint32_t kv)
{
    if (!io->has_sel)
        return kv;
    uint32_t r1 = io->sel_r1 < kv ? io->sel_r1 : kv, r0 = io->sel_r0 < r1 ? io->sel_r0 : r1;
    return r0 + (kv - r1) + io->sel_m;
}

/* The entries outside the candidates, in position order: pub[0 … n). */
static uint32_t public_rows(const pcheck_decl *io, uint32_t kv, uint32_t *pub)
{
    uint32_t n = 0;
    for (uint32_t j = 0; j < kv; j++)
        if (!io->has_sel || j < io->sel_r0 || j >= io->sel_r1)
            pub[n++] = j;
    return n;
}

/* "L<l>.s.<rest>" for a policy tensor "L<l>.<rest>", "s.<name>" for one of no layer. */
void secpol_rename_tensor(char out[48], const char *name)
{
    const char *rest = NULL;
    int l = op_layer_of(name, &rest);
    if (l >= 0 && rest)
        snprintf(out, 48, "L%d.s.%s", l, rest);
    else
        snprintf(out, 48, "s.%s", name);
}

/* A tensor of the policy's spliced program ("L<l>.s.…", "s.…"). */
static int is_spliced(const char *name)
{
    const char *rest = NULL;
    if (op_layer_of(name, &rest) < 0 || !rest)
        rest = name;
    return !strncmp(rest, "s.", 2);
}

static uint32_t find_renamed(const op_program *p, const char *name)
{
    char nm[48];
    secpol_rename_tensor(nm, name);
    return op_tensor_find(p, nm);
}

/* ---- configuration ------------------------------------------------------------------------ */

static void ecfg_free(void *cfg)
{
    ecfg *c = cfg;
    if (c && c->st)
        c->p->fini(c->st);
    if (c && c->st_ref)
        c->p->fini(c->st_ref);
    if (c)
        free(c->live);
    free(c);
}

static estate *live_of(const ecfg *c, const char *spliced)
{
    for (size_t i = 0; i < c->n_live; i++)
        if (!strcmp(c->live[i].name, spliced))
            return &c->live[i];
    return NULL;
}

/* Records that step st's program x names its state tensors (steps in increasing order). */
static int note_live(ecfg *c, const eprog *x, uint32_t st)
{
    for (uint32_t t = 0; t < x->prog.n_tens; t++) {
        if (x->prog.tens[t].role != OPT_CACHE)
            continue;
        char nm[48];
        secpol_rename_tensor(nm, x->prog.tens[t].name);
        estate *ls = live_of(c, nm);
        if (!ls) {
            estate *n = realloc(c->live, (c->n_live + 1) * sizeof *n);
            if (!n)
                return MS_ERR_NOMEM;
            c->live = n;
            ls = &c->live[c->n_live++];
            snprintf(ls->name, sizeof ls->name, "%s", nm);
        }
        ls->last = st;
    }
    c->probed = st;
    return MS_OK;
}

/* Whether a decode step's attention over its slots (PCHECK_IN_ATT_SLOTS, H × 1 × n) is a view of
 * the session's: it attends the new entry, then the public entries, then the gathered rows; the
 * slots are the gathered rows alone (none public) or every cached entry (no selection). The
 * ops read it after the softmax, so the rows they gather must be state as the step began. */
static int att_slots_ok(const ecfg *c, const eprog *x, uint32_t kv)
{
    const pcheck_decl *io = &x->io;
    uint32_t n = attended(io, kv) + 1;
    for (size_t i = 0; i < io->n_in; i++) {
        const op_tensor *T = &x->prog.tens[io->in_t[i]];
        if (io->in_what[i] == PCHECK_IN_ATT_SLOTS &&
            (T->batch != c->H || T->rows != 1 || T->cols != n))
            return 0;
    }
    return !io->has_sel ||
           (attended(io, kv) == io->sel_m && x->prog.tens[io->sel_t].role == OPT_CACHE);
}

/* secpol_emit_config, with why (may be NULL) set to the reason when *cfg stays NULL. */
static int emit_config(const policy_ops *p, const char *name, const policy_env *env,
                       const policy_args *a, uint32_t n, void **cfg, char *why, size_t cap,
                       errbuf *e)
{
    *cfg = NULL;
    if (!p->emit_cost)
        return MS_OK;
    ecfg *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    *c = (ecfg){
        .p = p, .L = env->n_layers, .H = env->n_heads, .Hkv = env->n_kv_heads, .d = env->head_dim};
    snprintf(c->name, sizeof c->name, "%s", name);
    int rc = p->init(env, a, &c->st, e);
    if (!rc)
        rc = p->init(env, a, &c->st_ref, e);
    /* does its emit_cost take its operands, and can the session bind them at every step? */
    int inputs = 0, bindable = 1;
    for (uint32_t st = 0, P = env->prompt_len; !rc && bindable && P + st <= n; st++)
        for (uint32_t l = 0; !rc && bindable && l < c->L; l++) {
            eprog x;
            int dec = st > 0; /* the prompt, then the decode steps over P + st − 1 entries */
            uint32_t kv = dec ? P + st - 1 : P;
            if (dec && kv >= n)
                break;
            rc = probe(c, dec ? PHASE_DECODE : PHASE_PREFILL, l, kv, &x, e);
            if (!rc && note_live(c, &x, st))
                rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
            inputs |= x.io.n_in > 0;
            for (size_t i = 0; !rc && i < x.io.n_in; i++) {
                const op_tensor *T = &x.prog.tens[x.io.in_t[i]];
                int w = x.io.in_what[i], was = bindable;
                bindable &= w == PCHECK_IN_KEYS_NEW ||
                            (w == PCHECK_IN_KV && T->batch == c->Hkv && T->cols == 2 * c->d &&
                             (T->rows == kv || (dec && T->rows > kv && x.io.has_bias))) ||
                            (dec && w == PCHECK_IN_QUERY &&
                             (size_t)T->batch * T->rows * T->cols == (size_t)c->H * c->d) ||
                            (!dec && w == PCHECK_IN_PROMPT_ATT && T->batch == c->H &&
                             T->rows <= kv && T->cols <= kv) ||
                            (dec && w == PCHECK_IN_KV_NEW && T->batch == c->Hkv && T->rows == 1 &&
                             T->cols == 2 * c->d) ||
                            (dec && w == PCHECK_IN_ATT_SLOTS && att_slots_ok(c, &x, kv));
                if (was && !bindable && why)
                    snprintf(why, cap,
                             "its ops read %s (%u x %u x %u) at layer %u of the %s, which the "
                             "session does not bind",
                             T->name, T->batch, T->rows, T->cols, l, dec ? "decode" : "prompt");
            }
            if (bindable && x.io.has_sel && (!dec || x.prog.tens[x.io.sel_t].cols != 2 * c->d)) {
                bindable = 0;
                if (why)
                    snprintf(
                        why, cap, "its ops name a selection %s, which the session does not attend",
                        dec ? "of other columns than the cached [K | V] rows" : "at the prompt");
            }
            eprog_free(&x);
        }
    /* no operands: its ops are a cost, not a computation; a selection at the prompt, or of
     * other columns than the cached [K | V] rows, is not one the session attends */
    if (!rc && !inputs && why)
        snprintf(why, cap,
                 "its ops take none of the session's operands at these parameters: "
                 "a cost, not a computation");
    if (rc || !inputs || !bindable) {
        ecfg_free(c);
        return rc;
    }
    *cfg = c;
    return MS_OK;
}

int secpol_emit_config(const policy_ops *p, const char *name, const policy_env *env,
                       const policy_args *a, uint32_t n, void **cfg, errbuf *e)
{
    return emit_config(p, name, env, a, n, cfg, NULL, 0, e);
}

int secpol_emit_why(const policy_ops *p, const policy_env *env, const policy_args *a, uint32_t n,
                    char *why, size_t cap)
{
    errbuf e;
    void *cfg = NULL;
    why[0] = 0;
    if (!p->emit_cost)
        snprintf(why, cap, "it states no ops");
    else if (emit_config(p, p->name, env, a, n, &cfg, why, cap, &e))
        snprintf(why, cap, "%s", e.msg);
    if (cfg)
        ecfg_free(cfg);
    return why[0] != 0;
}

int secpol_emit_declares(const policy_ops *p, const policy_env *env, const policy_args *a)
{
    errbuf e;
    void *cfg = NULL;
    if (!p->emit_cost || secpol_emit_config(p, p->name, env, a, env->max_len, &cfg, &e))
        return 0;
    ecfg_free(cfg);
    return cfg != NULL;
}

static int emit_cfg_unused(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    *cfg = NULL;
    return err_set(e, MS_ERR_INTERNAL, "selection on shares: configured by secpol_emit_config");
}

static uint32_t emit_rows(const void *cfg, const secpol_run *r, uint32_t layer, uint32_t kv)
{
    const ecfg *c = cfg;
    eprog x;
    errbuf e;
    uint32_t n = kv;
    if (!probe(c, PHASE_DECODE, layer, kv, &x, &e))
        n = attended(&x.io, kv);
    eprog_free(&x);
    return n;
}

/* ---- the step's program ------------------------------------------------------------------- */

static op view(int phase, uint32_t layer, uint32_t batch, uint32_t m, uint32_t n, uint32_t in0,
               uint32_t in1, uint32_t out, uint32_t flags, int32_t iarg)
{
    return (op){.kind = OP_VIEW,
                .phase = (uint8_t)phase,
                .cat = OPC_POLICY,
                .layer = (int16_t)layer,
                .group = -1,
                .batch = batch,
                .m = m,
                .n = n,
                .in = {in0, in1, OP_NONE},
                .out = out,
                .flags = flags,
                .iarg = iarg};
}

/* The index of the first op writing out of the given kind, from index from; -1 if none. */
static long find_from(const op_program *p, size_t from, int kind, uint32_t out)
{
    for (size_t i = from; i < p->n_ops; i++)
        if (p->ops[i].kind == kind && p->ops[i].out == out)
            return (long)i;
    return -1;
}

/* The selection's score biases (n_heads × m, pcheck_selection_bias) into the columns of its
 * rows in the step's scores (H, 1, n: the new entry, npub public entries, the gathered rows),
 * the other columns 0, added right before the softmax. */
static int splice_bias(const ecfg *c, uint32_t l, const pcheck_decl *io, uint32_t bias,
                       uint32_t npub, uint32_t sc, op_program *p, errbuf *e)
{
    const op_tensor *B = &p->tens[bias], *S = &p->tens[sc];
    uint32_t m = io->sel_m, H = c->H, n = S->cols;
    if ((size_t)B->batch * B->rows * B->cols != (size_t)H * m || S->batch != H || S->rows != 1 ||
        1 + npub + m > n)
        return err_set(e, MS_ERR_INPUT,
                       "policy %s: its selection's score biases %s are not n_heads x %u values "
                       "of the step's attention",
                       c->name, B->name, m);
    char nm[48];
    op_layer_name(nm, (int)l, "s.bias_in");
    uint32_t in = op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, H, m, 1);
    op_layer_name(nm, (int)l, "s.bias_rows");
    uint32_t rows = op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, H, n, 1);
    op_layer_name(nm, (int)l, "s.bias");
    uint32_t full = op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, H, 1, n);
    if (in == OP_NONE || rows == OP_NONE || full == OP_NONE)
        return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    size_t from = p->n_ops;
    op o[4] = {view(PHASE_DECODE, l, H, m, 1, bias, OP_NONE, in, 0, 0),
               view(PHASE_DECODE, l, H, m, 1, in, OP_NONE, rows, 0, (int32_t)(1 + npub)),
               view(PHASE_DECODE, l, H, n, 1, rows, OP_NONE, full, 0, 0),
               view(PHASE_DECODE, l, H, 1, n, sc, full, sc, 0, 0)};
    o[3].kind = OP_ADD;
    for (int i = 0; i < 4; i++)
        if (op_emit(p, &o[i]) < 0)
            return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    long at = secpol_find_op(p, OP_SOFTMAX, sc);
    if (at < 0)
        return err_set(e, MS_ERR_INTERNAL, "selection on shares: layer %u has no softmax", l);
    return secpol_ops_move(p, at, from, e);
}

/* The prompt's cached [K | V] rows (Hkv, P, 2d) from the layer's caches after the prompt's
 * append (kc, vc: (Hkv, P, d)): each key row and value row written side by side as the two
 * rows of an instance (Hkv·P, 2, d), whose memory is that of (Hkv, P, 2d). Views: local. */
static int prompt_kv(const ecfg *c, uint32_t l, uint32_t kc, uint32_t vc, uint32_t out,
                     op_program *p, errbuf *e)
{
    uint32_t Hkv = c->Hkv, d = c->d, P = p->tens[kc].rows;
    opb b;
    opb_init(&b, p, PHASE_PREFILL, (int)l, OPC_POLICY, NULL);
    uint32_t pair = opb_tensor(&b, "s.kv_pair", OPT_TEMP, Hkv * P, 2, d);
    for (int w = 0; w < 2; w++) {
        uint32_t r = opb_tensor(&b, w ? "s.v_rows" : "s.k_rows", OPT_TEMP, Hkv * P, 1, d);
        opb_op(&b, OP_VIEW, Hkv * P, 1, 0, d, w ? vc : kc, OP_NONE, OP_NONE, r, 0, 0, 0);
        opb_put(&b, r, pair, Hkv * P, (uint32_t)w, 1, d);
    }
    opb_op(&b, OP_VIEW, Hkv, P, 0, 2 * d, pair, OP_NONE, OP_NONE, out, 0, 0, 0);
    return opb_failed(&b) ? err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory") : MS_OK;
}

/* The prompt attention of the last w queries over entries [0, n): rows P − w … P − 1 and
 * columns 0 … n − 1 of the layer's probabilities sc (H, P, P) after their softmax, into out
 * (H, w, n). Views: local. */
static int prompt_att(const ecfg *c, uint32_t l, uint32_t sc, uint32_t P, uint32_t out, uint32_t w,
                      uint32_t n, op_program *p, errbuf *e)
{
    uint32_t H = c->H;
    opb b;
    opb_init(&b, p, PHASE_PREFILL, (int)l, OPC_POLICY, NULL);
    uint32_t rows = opb_rows(&b, sc, H, P - w, w, P, "s.att_rows");
    uint32_t cols =
        opb_rows(&b, opb_transpose(&b, rows, H, w, P, "s.att_t"), H, 0, n, w, "s.att_cols");
    opb_put(&b, opb_transpose(&b, cols, H, n, w, "s.att_win"), out, H, 0, w, n);
    return opb_failed(&b) ? err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory") : MS_OK;
}

/* The decode step's operands of its new entry and its attention: the new [K | V] row
 * (PCHECK_IN_KV_NEW, Hkv × 1 × 2d: row 0 of the layer's caches after the step's append, side by
 * side) when kv_new, the attention over its slots (PCHECK_IN_ATT_SLOTS, H × 1 × n: the
 * probabilities sc (H, 1, n) after their softmax, the new entry's column 0 moved behind the
 * others) when att. Views: local. */
static int decode_inputs(const ecfg *c, uint32_t l, const pcheck_decl *io, const op_program *q,
                         const uint32_t *map, uint32_t kc, uint32_t vc, uint32_t sc, int kv_new,
                         int att, op_program *p, errbuf *e)
{
    uint32_t Hkv = c->Hkv, H = c->H, d = c->d;
    opb b;
    opb_init(&b, p, PHASE_DECODE, (int)l, OPC_POLICY, NULL);
    for (size_t i = 0; i < io->n_in; i++) {
        uint32_t out = map[io->in_t[i]];
        const op_tensor *T = &q->tens[io->in_t[i]];
        if (kv_new && io->in_what[i] == PCHECK_IN_KV_NEW) {
            if (T->batch != Hkv || T->rows != 1 || T->cols != 2 * d)
                return err_set(e, MS_ERR_INPUT,
                               "policy %s: its new [K | V] row %s is not n_kv_heads x 1 x "
                               "2·head_dim",
                               c->name, T->name);
            uint32_t pair = opb_tensor(&b, "s.kvn_pair", OPT_TEMP, Hkv, 2, d);
            for (int w = 0; w < 2; w++)
                opb_put(&b, opb_rows(&b, w ? vc : kc, Hkv, 0, 1, d, w ? "s.kvn_v" : "s.kvn_k"),
                        pair, Hkv, (uint32_t)w, 1, d);
            opb_op(&b, OP_VIEW, Hkv, 1, 0, 2 * d, pair, OP_NONE, OP_NONE, out, 0, 0, 0);
        } else if (att && io->in_what[i] == PCHECK_IN_ATT_SLOTS) {
            uint32_t n = p->tens[sc].cols;
            if (T->batch != H || T->rows != 1 || T->cols != n || p->tens[sc].rows != 1 || n < 1)
                return err_set(e, MS_ERR_INPUT,
                               "policy %s: its attention over the slots %s is not the step's "
                               "n_heads x 1 x %u",
                               c->name, T->name, n);
            uint32_t t = opb_transpose(&b, sc, H, 1, n, "s.slots_att_t");
            uint32_t u = opb_tensor(&b, "s.slots_att_u", OPT_TEMP, H, n, 1);
            if (n > 1)
                opb_put(&b, opb_rows(&b, t, H, 1, n - 1, 1, "s.slots_att_old"), u, H, 0, n - 1, 1);
            opb_put(&b, opb_rows(&b, t, H, 0, 1, 1, "s.slots_att_new"), u, H, n - 1, 1, 1);
            uint32_t v = opb_transpose(&b, u, H, n, 1, "s.slots_att_v");
            opb_op(&b, OP_VIEW, H, 1, 0, n, v, OP_NONE, OP_NONE, out, 0, 0, 0);
        }
    }
    return opb_failed(&b) ? err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory") : MS_OK;
}

/* The policy's ops (its tensors renamed by map) at the end of p. */
static int splice_ops(const op_program *q, const uint32_t *map, int phase, op_program *p, errbuf *e)
{
    for (size_t i = 0; i < q->n_ops; i++) {
        op o = q->ops[i];
        for (int k = 0; k < 3; k++)
            o.in[k] = o.in[k] < q->n_tens ? map[o.in[k]] : o.in[k];
        o.out = o.out < q->n_tens ? map[o.out] : o.out;
        o.phase = (uint8_t)phase;
        if (op_emit(p, &o) < 0)
            return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    }
    return MS_OK;
}

/* Layer l's program spliced before its attention scores (after their softmax when it reads the
 * prompt's attention). */
static int splice(const ecfg *c, const secpol_step *st, uint32_t l, eprog *x, op_program *p,
                  errbuf *e)
{
    const op_program *q = &x->prog;
    const pcheck_decl *io = &x->io;
    int phase = st->s ? PHASE_DECODE : PHASE_PREFILL;
    uint32_t kv = step_kv(st), t = st->t, Hkv = c->Hkv, d = c->d;
    uint32_t kc = op_layer_find(p, (int)l, "kcache"), vc = op_layer_find(p, (int)l, "vcache"),
             qt = op_layer_find(p, (int)l, "q"), sc = op_layer_find(p, (int)l, "scores");
    long at = sc == OP_NONE ? -1 : find_from(p, 0, OP_MATMUL, sc);
    long qs = qt == OP_NONE ? -1 : find_from(p, 0, OP_MUL_PUB, qt);
    if (kc == OP_NONE || vc == OP_NONE || at < 0 || qs < 0)
        return err_set(e, MS_ERR_INTERNAL, "selection on shares: layer %u has no attention", l);
    uint32_t *map = calloc(q->n_tens + 1, sizeof *map);
    if (!map)
        return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    int rc = MS_OK;
    for (uint32_t i = 0; !rc && i < q->n_tens; i++) {
        const op_tensor *T = &q->tens[i];
        char nm[48];
        secpol_rename_tensor(nm, T->name);
        map[i] = op_tensor_find(p, nm);
        if (map[i] == OP_NONE)
            map[i] = op_tensor_add(p, nm, T->role, T->dom, T->batch, T->rows, T->cols);
        if (map[i] == OP_NONE)
            rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    }
    /* the query: a copy of the rotated query before its scaling (at a decode step) */
    for (size_t i = 0; !rc && i < io->n_in; i++) {
        if (io->in_what[i] != PCHECK_IN_QUERY)
            continue;
        const op_tensor *T = &q->tens[io->in_t[i]];
        if (phase != PHASE_DECODE || (size_t)T->batch * T->rows * T->cols != (size_t)c->H * d)
            rc = err_set(e, MS_ERR_INPUT,
                         "policy %s: its query operand %s is the decode step's (n_heads x 1 x "
                         "head_dim) on shares",
                         c->name, T->name);
        size_t from = p->n_ops;
        op o = view(phase, l, 1, 1, c->H * d, qt, OP_NONE, map[io->in_t[i]], 0, 0);
        if (!rc && op_emit(p, &o) < 0)
            rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
        if (!rc)
            rc = secpol_ops_move(p, qs, from, e);
        at++;
    }
    size_t from = p->n_ops;
    /* the new keys: a slice of the cache after this step's append (rows 0 … t−1) */
    for (size_t i = 0; !rc && i < io->n_in; i++) {
        const op_tensor *T = &q->tens[io->in_t[i]];
        if (io->in_what[i] == PCHECK_IN_KEYS_NEW) {
            if (T->batch != Hkv || T->rows != t || T->cols != d)
                rc = err_set(e, MS_ERR_INPUT,
                             "policy %s: its new keys %s are not n_kv_heads x %u x head_dim",
                             c->name, T->name, t);
            op o = view(phase, l, Hkv, t, d, kc, OP_NONE, map[io->in_t[i]], 0, 0);
            if (!rc && op_emit(p, &o) < 0)
                rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
        } else if (io->in_what[i] == PCHECK_IN_KV &&
                   (T->batch != Hkv || T->cols != 2 * d || T->rows < kv ||
                    (T->rows > kv && (phase != PHASE_DECODE || !io->has_bias)))) {
            rc = err_set(e, MS_ERR_INPUT,
                         "policy %s: its cached rows %s are the step's n_kv_heads x %u x "
                         "2·head_dim on shares",
                         c->name, T->name, kv);
        } else if (io->in_what[i] == PCHECK_IN_KV && phase == PHASE_PREFILL) {
            rc = prompt_kv(c, l, kc, vc, map[io->in_t[i]], p, e);
        } else if (io->in_what[i] == PCHECK_IN_PROMPT_ATT) {
            if (phase != PHASE_PREFILL || T->batch != c->H || T->rows > t || T->cols > t)
                rc = err_set(e, MS_ERR_INPUT,
                             "policy %s: its prompt attention %s is the prompt's n_heads x w x n "
                             "(w, n at most %u) on shares",
                             c->name, T->name, t);
            if (!rc)
                rc = prompt_att(c, l, sc, t, map[io->in_t[i]], T->rows, T->cols, p, e);
            /* the selection reads the prompt's probabilities: it follows their softmax */
            long sm = rc ? -1 : secpol_find_op(p, OP_SOFTMAX, sc);
            if (!rc && sm < 0)
                rc = err_set(e, MS_ERR_INTERNAL, "selection on shares: layer %u has no softmax", l);
            at = sm + 1 > at ? sm + 1 : at;
        }
    }
    /* a decode step reading its attention over its slots: its ops follow the softmax, the rows
     * it attends (its state as the step began) are gathered before the scores */
    int late = 0;
    for (size_t i = 0; i < io->n_in; i++)
        late |= phase == PHASE_DECODE && io->in_what[i] == PCHECK_IN_ATT_SLOTS;
    if (!rc && late && io->has_sel && q->tens[io->sel_t].role != OPT_CACHE)
        rc = err_set(e, MS_ERR_INPUT,
                     "policy %s: its ops read the step's attention over the rows it gathers, "
                     "which must then be state as the step began",
                     c->name);
    if (!rc && phase == PHASE_DECODE && !late)
        rc = decode_inputs(c, l, io, q, map, kc, vc, sc, 1, 0, p, e);
    if (!rc && !late)
        rc = splice_ops(q, map, phase, p, e);
    /* the gathered rows' K and V columns behind the new entry and the public entries */
    if (!rc && phase == PHASE_DECODE && io->has_sel) {
        const op_tensor *S = &q->tens[io->sel_t];
        uint32_t m = io->sel_m, npub = attended(io, kv) - m;
        if (S->cols != 2 * d || (size_t)S->batch * S->rows != (size_t)Hkv * m)
            rc = err_set(e, MS_ERR_INPUT,
                         "policy %s: its selection %s is not n_kv_heads x %u x 2·head_dim rows "
                         "of the cached [K | V]: on shares the step attends what it gathers",
                         c->name, S->name, m);
        /* the index views take columns of one instance: the rows as (1, Hkv·m, 2d) */
        char nm[48];
        op_layer_name(nm, (int)l, "s.rows");
        uint32_t flat =
            rc || !m ? OP_NONE : op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, 1, Hkv * m, 2 * d);
        op o0 = view(phase, l, 1, Hkv * m, 2 * d, map[io->sel_t], OP_NONE, flat, 0, 0);
        if (!rc && m && (flat == OP_NONE || op_emit(p, &o0) < 0))
            rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
        for (int w = 0; !rc && w < 2 && m; w++) {
            op_layer_name(nm, (int)l, w ? "s.vcols" : "s.kcols");
            uint32_t ix = op_tensor_add(p, nm, OPT_PUBLIC, DOM_ARITH, 1, d, 1);
            op_layer_name(nm, (int)l, w ? "s.vpart" : "s.kpart");
            uint32_t part = op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, 1, Hkv * m, d);
            op o1 = view(phase, l, 1, Hkv * m, d, flat, ix, part, OPF_INDEX_COLS, 0);
            op o2 = view(phase, l, Hkv, m, d, part, OP_NONE, w ? vc : kc, 0, (int32_t)(1 + npub));
            if (ix == OP_NONE || part == OP_NONE || op_emit(p, &o1) < 0 || op_emit(p, &o2) < 0)
                rc = err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
        }
    }
    if (!rc)
        rc = secpol_ops_move(p, at, from, e);
    if (!rc && late) { /* after the softmax: the new row, the attention, the ops */
        from = p->n_ops;
        rc = decode_inputs(c, l, io, q, map, kc, vc, sc, 1, 1, p, e);
        if (!rc)
            rc = splice_ops(q, map, phase, p, e);
        long sm = rc ? -1 : secpol_find_op(p, OP_SOFTMAX, sc);
        if (!rc && sm < 0)
            rc = err_set(e, MS_ERR_INTERNAL, "selection on shares: layer %u has no softmax", l);
        if (!rc)
            rc = secpol_ops_move(p, sm + 1, from, e);
    }
    /* rows of padding: their biases added to the gathered rows' scores before the softmax */
    if (!rc && phase == PHASE_DECODE && io->has_sel && io->has_bias && io->sel_m)
        rc = splice_bias(c, l, io, map[io->sel_bias], attended(io, kv) - io->sel_m, sc, p, e);
    free(map);
    return rc;
}

static int emit_emit(const void *cfg, const secpol_run *r, const secpol_step *st, op_program *p,
                     errbuf *e)
{
    const ecfg *c = cfg;
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < c->L; l++) {
        eprog x;
        rc = probe(c, st->s ? PHASE_DECODE : PHASE_PREFILL, l, step_kv(st), &x, e);
        /* a selection without ops: rows it gathered earlier, attended; a prompt's operands
         * without ops: what the audit's select() observes (a pyramid layer keeping none) */
        if (!rc && (x.prog.n_ops || x.io.has_sel || (!st->s && x.io.n_in)))
            rc = splice(c, st, l, &x, p, e);
        eprog_free(&x);
    }
    return rc;
}

/* The column indices of the gathered rows' K (0 … d−1) and V (d … 2d−1); the policy's own
 * public tensors as `policy check` binds them. */
static int emit_public(const void *cfg, const secpol_run *r, const secpol_step *st, int frac,
                       const op_tensor *t, uint64_t *out, size_t n)
{
    const ecfg *c = cfg;
    const char *rest = NULL;
    int layer = op_layer_of(t->name, &rest);
    if (layer < 0 || !rest) /* a tensor of no layer (every layer's selection at once) */
        rest = t->name;
    if (strncmp(rest, "s.", 2))
        return 0;
    int k = layer >= 0 && !strcmp(rest, "s.kcols"), v = layer >= 0 && !strcmp(rest, "s.vcols");
    if (k || v) {
        for (size_t i = 0; i < n; i++)
            out[i] = (i % c->d) + (v ? c->d : 0);
        return 1;
    }
    op_tensor T = *t;
    snprintf(T.name, sizeof T.name, "%s", rest + 2);
    return pcheck_public_value_at(&T, frac, out, n);
}

/* ---- the carried state -------------------------------------------------------------------- */

typedef struct saved {
    char name[48];
    mpc_val v;
} saved;

typedef struct enode {
    const ecfg *c;
    secpol_run r;
    mpc_val *tab; /* per layer (Hkv, entries so far, 2d): [K | V] in position order */
    uint32_t n_tab;
    saved *sv;
    size_t n_sv;
} enode;

static int emit_node_new(void *cfg, const secpol_run *r, void **state, errbuf *e)
{
    const ecfg *c = cfg;
    enode *nd = calloc(1, sizeof *nd);
    if (nd)
        nd->tab = calloc(c->L, sizeof *nd->tab);
    if (!nd || !nd->tab) {
        free(nd);
        return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    }
    nd->c = c;
    nd->r = *r;
    *state = nd;
    return MS_OK;
}

static void emit_node_free(void *state, eng *e)
{
    enode *nd = state;
    for (uint32_t l = 0; l < nd->c->L; l++)
        e->vt->release(e, &nd->tab[l]);
    for (size_t i = 0; i < nd->n_sv; i++)
        e->vt->release(e, &nd->sv[i].v);
    free(nd->sv);
    free(nd->tab);
    free(nd);
}

/* rows[q] of the table (Hkv, R, F = 2d) into rows lead + q of a (Hkv, rows, d) tensor, columns
 * col … col+d−1, the rest zero. */
static int tab_rows(eng *e, const mpc_val *tab, uint32_t Hkv, uint32_t R, uint32_t d,
                    const uint32_t *rows, uint32_t nr, uint32_t col, uint32_t T, uint32_t lead,
                    mpc_val *z)
{
    size_t n = (size_t)Hkv * T * d;
    uint32_t *idx = calloc(n + 1, sizeof *idx);
    uint64_t *sel = calloc(n + 1, sizeof *sel);
    int rc = idx && sel ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t g = 0; !rc && g < Hkv; g++)
        for (uint32_t q = 0; q < nr && lead + q < T; q++)
            for (uint32_t i = 0; i < d; i++) {
                size_t at = ((size_t)g * T + lead + q) * d + i;
                idx[at] = (uint32_t)(((size_t)g * R + rows[q]) * 2 * d + col + i);
                sel[at] = 1;
            }
    if (!rc && nr && R)
        rc = secpol_relayout(e, z, tab, idx, sel, n);
    else if (!rc)
        rc = e->vt->alloc(e, z, n, DOM_ARITH);
    free(idx), free(sel);
    return rc;
}

static saved *find_saved(enode *nd, const char *name)
{
    for (size_t i = 0; i < nd->n_sv; i++)
        if (!strcmp(nd->sv[i].name, name))
            return &nd->sv[i];
    return NULL;
}

static int emit_bind(void *state, eng *e, const op_program *p, mpc_program_run *run,
                     const secpol_step *st, errbuf *err)
{
    enode *nd = state;
    const ecfg *c = nd->c;
    uint32_t kv = step_kv(st), Hkv = c->Hkv, d = c->d;
    int rc = MS_OK;
    /* the policy's state tensors, carried by name */
    for (uint32_t i = 0; i < p->n_tens; i++) {
        saved *s;
        if (p->tens[i].role != OPT_CACHE || !is_spliced(p->tens[i].name) ||
            !(s = find_saved(nd, p->tens[i].name)) || s->v.n != run->vals[i].n)
            continue;
        e->vt->release(e, &run->vals[i]);
        run->vals[i] = s->v;
        s->v = (mpc_val){0};
    }
    if (!st->s)
        return MS_OK; /* the prompt: nothing cached yet */
    uint32_t *pub = calloc(kv + 1, sizeof *pub), *all = calloc(kv + 1, sizeof *all);
    if (!pub || !all)
        rc = err_set(err, MS_ERR_NOMEM, "selection on shares: out of memory");
    for (uint32_t j = 0; all && j < kv; j++)
        all[j] = j;
    for (uint32_t l = 0; !rc && l < c->L; l++) {
        eprog x;
        rc = probe(c, PHASE_DECODE, l, kv, &x, err);
        uint32_t np = rc ? 0 : public_rows(&x.io, kv, pub);
        /* the attended cache: the new entry's row 0 (the step's append), the public entries */
        for (int w = 0; !rc && w < 2; w++) {
            uint32_t id = op_layer_find(p, (int)l, w ? "vcache" : "kcache");
            if (id == OP_NONE) {
                rc = err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor L%u.%ccache", l,
                             w ? 'v' : 'k');
                break;
            }
            e->vt->release(e, &run->vals[id]);
            rc = tab_rows(e, &nd->tab[l], Hkv, nd->n_tab, d, pub, np, w ? d : 0, p->tens[id].rows,
                          1, &run->vals[id]);
        }
        /* the cached [K | V] rows operand */
        for (size_t i = 0; !rc && i < x.io.n_in; i++) {
            if (x.io.in_what[i] != PCHECK_IN_KV)
                continue;
            uint32_t id = find_renamed(p, x.prog.tens[x.io.in_t[i]].name);
            if (id == OP_NONE)
                continue;
            e->vt->release(e, &run->vals[id]);
            mpc_val a = {0}, b = {0};
            uint32_t R = p->tens[id].rows; /* past kv: a policy's padding, zero */
            rc = tab_rows(e, &nd->tab[l], Hkv, nd->n_tab, d, all, kv, 0, R, 0, &a);
            if (!rc)
                rc = tab_rows(e, &nd->tab[l], Hkv, nd->n_tab, d, all, kv, d, R, 0, &b);
            /* interleave K and V per row: (Hkv, R, 2d) */
            if (!rc) {
                const mpc_val *src[2] = {&a, &b};
                size_t N = (size_t)Hkv * R * 2 * d;
                uint8_t *which = calloc(N + 1, 1);
                uint32_t *idx = calloc(N + 1, sizeof *idx);
                if (!which || !idx)
                    rc = MS_ERR_NOMEM;
                for (size_t k = 0; !rc && k < N; k++) {
                    size_t row = k / (2 * d), col = k % (2 * d);
                    which[k] = col >= d;
                    idx[k] = (uint32_t)(row * d + col % d);
                }
                if (!rc)
                    rc = secpol_pick(e, &run->vals[id], N, src, 2, which, idx);
                free(which), free(idx);
            }
            e->vt->release(e, &a);
            e->vt->release(e, &b);
        }
        eprog_free(&x);
    }
    free(pub), free(all);
    return rc;
}

static int emit_update(void *state, eng *e, mpc_net *net, const op_program *p, mpc_program_run *run,
                       const secpol_step *st, errbuf *err)
{
    enode *nd = state;
    const ecfg *c = nd->c;
    uint32_t kv = st->kv, t = st->t, Hkv = c->Hkv, d = c->d, R = kv + t;
    int rc = MS_OK;
    /* the policy's state tensors for the next step: those a later step's program names */
    for (uint32_t i = 0; !rc && i < p->n_tens; i++) {
        if (p->tens[i].role != OPT_CACHE || !is_spliced(p->tens[i].name))
            continue;
        saved *s = find_saved(nd, p->tens[i].name);
        const estate *ls = live_of(c, p->tens[i].name);
        if (ls && ls->last <= st->s && st->s < c->probed) { /* no later step reads it */
            if (s)
                e->vt->release(e, &s->v);
            continue;
        }
        if (!s) {
            saved *ns = realloc(nd->sv, (nd->n_sv + 1) * sizeof *ns);
            if (!ns)
                return err_set(err, MS_ERR_NOMEM, "selection on shares: out of memory");
            nd->sv = ns;
            s = &nd->sv[nd->n_sv++];
            memset(s, 0, sizeof *s);
            snprintf(s->name, sizeof s->name, "%s", p->tens[i].name);
        }
        /* a copy (a local identity permute): the audit may open the step's value after this */
        e->vt->release(e, &s->v);
        size_t n = run->vals[i].n;
        uint32_t *id = malloc((n + 1) * sizeof *id);
        for (size_t k = 0; id && k < n; k++)
            id[k] = (uint32_t)k;
        rc = !id ? MS_ERR_NOMEM : e->vt->alloc(e, &s->v, n, run->vals[i].dom);
        if (!rc)
            rc = e->vt->permute(e, &s->v, &run->vals[i], id, n);
        free(id);
        if (rc)
            return err_set(err, rc, "selection on shares: carrying %s", s->name);
    }
    /* every layer's table grows by the step's entries (the cache's rows 0 … t−1) */
    size_t N = (size_t)Hkv * R * 2 * d;
    uint8_t *which = calloc(N + 1, 1);
    uint32_t *idx = calloc(N + 1, sizeof *idx);
    if (!which || !idx)
        rc = err_set(err, MS_ERR_NOMEM, "selection on shares: out of memory");
    for (uint32_t l = 0; !rc && l < c->L; l++) {
        uint32_t kc = op_layer_find(p, (int)l, "kcache"), vc = op_layer_find(p, (int)l, "vcache");
        if (kc == OP_NONE || vc == OP_NONE) {
            rc = err_set(err, MS_ERR_INTERNAL, "secure inference: layer %u has no cache", l);
            break;
        }
        uint32_t T = p->tens[kc].rows;
        for (size_t k = 0; k < N; k++) {
            size_t g = k / ((size_t)R * 2 * d), r = (k / (2 * d)) % R, col = k % (2 * d);
            if (r < kv)
                which[k] = 0, idx[k] = (uint32_t)((g * kv + r) * 2 * d + col);
            else
                which[k] = col < d ? 1 : 2, idx[k] = (uint32_t)((g * T + (r - kv)) * d + col % d);
        }
        const mpc_val *src[3] = {&nd->tab[l], &run->vals[kc], &run->vals[vc]};
        mpc_val z = {0};
        rc = secpol_pick(e, &z, N, src, 3, which, idx);
        if (!rc) {
            e->vt->release(e, &nd->tab[l]);
            nd->tab[l] = z;
        }
    }
    if (!rc)
        nd->n_tab = R;
    free(which), free(idx);
    return rc;
}

const secpol_ops secpol_emit_ops = {
    .which = "",
    .session_cache = 0,
    .own_query = 1,
    .config = emit_cfg_unused,
    .config_free = ecfg_free,
    .rows = emit_rows,
    .emit = emit_emit,
    .bind_public = emit_public,
    .node_new = emit_node_new,
    .node_free = emit_node_free,
    .bind = emit_bind,
    .update = emit_update,
    .audit_tensor = secpol_emit_audit_tensor,
    .audit_note = secpol_emit_audit_note,
};

/* pcheck.c — a policy's emitted selection ops run on the plain engine against its select()
 * (pcheck.h). */
#include "pcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/datadir.h"
#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "protocols/program/proto.h"
#include "sim/policy/compose.h"
#include "sim/policy/plugin.h"
#include "sim/trace/trace.h"

#define PCHECK_IN_MAX 16

/* What the emit_cost call in progress declared (pcheck_input, pcheck_selection). */
typedef struct pcheck_io {
    size_t n_in;
    uint32_t in_t[PCHECK_IN_MAX];
    int in_what[PCHECK_IN_MAX];
    int has_sel;
    uint32_t sel_t, sel_m, sel_r0, sel_r1, sel_score;
    double sel_tol;
    int has_bias;
    uint32_t sel_bias;
    int has_stage;
    uint32_t sel_stage;
    int has_thr;
    double sel_thr;
} pcheck_io;

/* The check in progress on this thread, NULL in a run. */
static _Thread_local pcheck_io *cur;
static _Thread_local int cur_frac;

int pcheck_frac_bits(void)
{
    if (cur_frac)
        return cur_frac;
    proto_cfg cfg;
    errbuf e = {{0}};
    return proto_cfg_default("semi2k", &cfg, &e) ? 18 : cfg.frac_bits;
}

uint32_t pcheck_input(opb *b, int what, uint32_t B, uint32_t rows, uint32_t cols)
{
    static const char *const names[PCHECK_IN_ALL] = {"in.kv", "in.k_new",  "in.q",  "in.p_att",
                                                     "in.wo", "in.kv_new", "in.att"};
    if (what < 0 || what >= PCHECK_IN_ALL) {
        b->failed = 1;
        return OP_NONE;
    }
    uint32_t t = opb_tensor(b, names[what], OPT_TEMP, B, rows, cols);
    if (cur && t != OP_NONE) {
        if (cur->n_in == PCHECK_IN_MAX) {
            b->failed = 1;
            return OP_NONE;
        }
        cur->in_t[cur->n_in] = t;
        cur->in_what[cur->n_in++] = what;
    }
    return t;
}

void pcheck_selection(opb *b, uint32_t rows, uint32_t m, uint32_t r0, uint32_t r1, uint32_t score,
                      double tol)
{
    if (!cur || rows == OP_NONE || opb_failed(b))
        return;
    cur->has_sel = 1;
    cur->sel_t = rows;
    cur->sel_m = m;
    cur->sel_r0 = r0;
    cur->sel_r1 = r1;
    cur->sel_score = score;
    cur->sel_tol = tol > 0 ? tol : 0;
}

void pcheck_selection_bias(opb *b, uint32_t bias)
{
    if (!cur || bias == OP_NONE || opb_failed(b))
        return;
    cur->has_bias = 1;
    cur->sel_bias = bias;
}

void pcheck_selection_threshold(opb *b, double thr)
{
    if (!cur || opb_failed(b))
        return;
    cur->has_thr = 1;
    cur->sel_thr = thr;
}

void pcheck_selection_stage(opb *b, uint32_t mask)
{
    if (!cur || mask == OP_NONE || opb_failed(b))
        return;
    cur->has_stage = 1;
    cur->sel_stage = mask;
}

/* ---- the state carried between programs ------------------------------------------------ */

typedef struct saved {
    char name[48];
    uint64_t *v;
    size_t n;
    int made; /* an op of some program wrote it */
} saved;

typedef struct chk {
    const policy_ops *p;
    void *st;
    trace *t;
    policy_env env;
    eng *E;
    int frac;
    saved *sv;
    size_t n_sv, cap_sv;
    float *k, *v;         /* Hkv × d: one position's keys and values */
    uint8_t *keep;        /* Hkv × T */
    uint8_t *got;         /* Hkv × T: the ops' masks of a decode step, kv_len apart */
    uint8_t *alt;         /* Hkv × T: a stage's masks (carry) */
    float *att;           /* H × T: the renormalized rows observe() sees */
    uint64_t *kvraw;      /* Hkv × T × 2d: the bound [K | V] rows of the program */
    uint32_t kv_rows;     /* rows bound in kvraw */
    const uint64_t *sel0; /* the named selection's state when the program began, or NULL */
    uint32_t sel0_m, sel0_c;
    int sel0_bias; /* it names score biases: its slots select() drops get no attention */
    pcheck_result *r;
} chk;

static saved *find_saved(chk *c, const char *name)
{
    for (size_t i = 0; i < c->n_sv; i++)
        if (!strcmp(c->sv[i].name, name))
            return &c->sv[i];
    return NULL;
}

static int keep_saved(chk *c, const char *name, const uint64_t *v, size_t n, int made)
{
    saved *s = find_saved(c, name);
    if (!s) {
        if (c->n_sv == c->cap_sv) {
            size_t cap = c->cap_sv ? 2 * c->cap_sv : 16;
            saved *ns = realloc(c->sv, cap * sizeof *ns);
            if (!ns)
                return MS_ERR_NOMEM;
            c->sv = ns;
            c->cap_sv = cap;
        }
        s = &c->sv[c->n_sv++];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", name);
    }
    if (s->n != n) {
        uint64_t *nv = realloc(s->v, (n ? n : 1) * sizeof *nv);
        if (!nv)
            return MS_ERR_NOMEM;
        s->v = nv;
        s->n = n;
    }
    memcpy(s->v, v, n * sizeof *v);
    s->made |= made;
    return MS_OK;
}

/* ---- binding ------------------------------------------------------------------------------ */

static int cant(chk *c, const char *fmt, const char *a, uint32_t layer)
{
    c->r->ran = 0;
    char what[200];
    snprintf(what, sizeof what, fmt, a);
    snprintf(c->r->msg, sizeof c->r->msg, "layer %u: %s", layer, what);
    return -1;
}

/* PCHECK_IN_ATT_SLOTS: the decode step's attention row of every query head over the entries
 * the selection's rows of its KV head hold (located among the cached ones), then the new entry,
 * renormalized over those; without a selection, over every cached entry. A selection whose
 * score biases take rows out of the attention (an oblivious threshold): those select() drops
 * get none (the check compares the kept sets at the same step). */
static int bind_att_slots(chk *c, const op_tensor *T, uint32_t layer, int phase, uint32_t kv_len,
                          uint64_t *x, errbuf *e)
{
    const policy_env *v = &c->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim, n = T->cols;
    uint32_t m = c->sel0 ? c->sel0_m : kv_len;
    if (phase != PHASE_DECODE || T->batch != H || T->rows != 1 || n != m + 1 ||
        (c->sel0 && c->sel0_c > 2 * d))
        return cant(c,
                    "its attention operand %s is not n_heads x 1 x (the selection's rows + 1) "
                    "of a decode step",
                    T->name, layer);
    uint32_t *at = malloc((size_t)Hkv * n * sizeof *at);
    uint64_t *row = malloc(2 * (size_t)d * sizeof *row);
    int rc = at && row ? MS_OK : err_set(e, MS_ERR_NOMEM, "policy check: out of memory");
    int bad = 0;
    for (uint32_t g = 0; !rc && !bad && g < Hkv; g++) {
        uint32_t *ag = at + (size_t)g * n;
        ag[m] = kv_len;
        for (uint32_t i = 0; !rc && !bad && i < m; i++) {
            ag[i] = i;
            if (!c->sel0)
                continue;
            const uint64_t *want = c->sel0 + ((size_t)g * m + i) * c->sel0_c;
            ag[i] = UINT32_MAX;
            for (uint32_t j = 0; !rc && j < kv_len && ag[i] == UINT32_MAX; j++) {
                if ((rc = trace_kv(c->t, layer, j, c->k, c->v)))
                    rc = err_set(e, rc, "policy check: the trace's keys of layer %u position %u",
                                 layer, j);
                for (uint32_t q = 0; !rc && q < d; q++) {
                    row[q] = fx_encode(c->k[(size_t)g * d + q], c->frac);
                    row[d + q] = fx_encode(c->v[(size_t)g * d + q], c->frac);
                }
                if (!rc && !memcmp(row, want, c->sel0_c * sizeof *row))
                    ag[i] = j;
            }
            bad = !rc && ag[i] == UINT32_MAX;
        }
    }
    if (!rc && !bad) {
        const float *a = trace_att(c->t, layer);
        for (uint32_t h = 0; h < H; h++) {
            const float *r = a + (size_t)h * (kv_len + 1);
            const uint32_t *ah = at + (size_t)(h / (H / Hkv)) * n;
            const uint8_t *kp = c->keep + (size_t)(h / (H / Hkv)) * kv_len;
            double s = 0;
            for (uint32_t i = 0; i < n; i++)
                s += c->sel0_bias && ah[i] < kv_len && !kp[ah[i]] ? 0 : r[ah[i]];
            for (uint32_t i = 0; i < n; i++)
                x[(size_t)h * n + i] = c->sel0_bias && ah[i] < kv_len && !kp[ah[i]]
                                           ? 0
                                           : fx_encode(s > 0 ? r[ah[i]] / s : 0, c->frac);
        }
    }
    free(at);
    free(row);
    if (bad)
        return cant(c,
                    "a row of the selection its attention operand %s follows is none of the "
                    "cached entries",
                    T->name, layer);
    return rc;
}

/* Fills x (n values) with the operand what of layer at kv_len (decode) or the prompt: 0, -1
 * when the check cannot bind it (cant), or an error code. */
static int bind_input(chk *c, int what, const op_tensor *T, uint32_t layer, int phase,
                      uint32_t kv_len, uint64_t *x, errbuf *e)
{
    const policy_env *v = &c->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim;
    size_t n = (size_t)T->batch * T->rows * T->cols;
    if (what == PCHECK_IN_QUERY) {
        if (n != (size_t)v->n_heads * d)
            return cant(c, "its query operand %s is not n_heads x 1 x head_dim", T->name, layer);
        const float *q = trace_q(c->t, layer);
        for (size_t i = 0; i < n; i++)
            x[i] = fx_encode(q[i], c->frac);
        return 0;
    }
    if (what == PCHECK_IN_PROMPT_ATT) {
        uint32_t P = v->prompt_len, w = T->rows, pos0 = trace_pos(c->t);
        if (phase != PHASE_PREFILL || T->batch != v->n_heads || w > P || T->cols > P)
            return cant(c, "its prompt attention operand %s is not n_heads x w x n of the prompt",
                        T->name, layer);
        int rc = MS_OK;
        for (uint32_t i = 0; !rc && i < w; i++) {
            uint32_t pos = P - w + i;
            if ((rc = trace_seek(c->t, pos, e)))
                break;
            const float *a = trace_att(c->t, layer);
            for (uint32_t h = 0; h < v->n_heads; h++)
                for (uint32_t j = 0; j < T->cols; j++)
                    x[((size_t)h * w + i) * T->cols + j] =
                        j <= pos ? fx_encode(a[(size_t)h * (pos + 1) + j], c->frac) : 0;
        }
        if (!rc)
            rc = trace_seek(c->t, pos0, e);
        return rc;
    }
    if (what == PCHECK_IN_WO) {
        uint32_t R = 0, C = 0, H = v->n_heads;
        const float *w = trace_wo(c->t, layer, &R, &C);
        if (!w || T->batch != H || T->rows != d || T->cols != R || C != H * d)
            return cant(c, "its output projection operand %s is not n_heads x head_dim x dim",
                        T->name, layer);
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t i = 0; i < d; i++)
                for (uint32_t r = 0; r < R; r++)
                    x[((size_t)h * d + i) * R + r] =
                        fx_encode(w[(size_t)r * C + h * d + i], c->frac);
        return 0;
    }
    if (what == PCHECK_IN_ATT_SLOTS)
        return bind_att_slots(c, T, layer, phase, kv_len, x, e);
    if (what == PCHECK_IN_KV_NEW) {
        if (phase != PHASE_DECODE || T->batch != Hkv || T->rows != 1 || T->cols != 2 * d)
            return cant(c,
                        "its new row operand %s is not n_kv_heads x 1 x 2·head_dim of a decode "
                        "step",
                        T->name, layer);
        int rc = trace_kv(c->t, layer, kv_len, c->k, c->v);
        if (rc)
            return err_set(e, rc, "policy check: the trace's keys of layer %u position %u", layer,
                           kv_len);
        for (uint32_t g = 0; g < Hkv; g++)
            for (uint32_t i = 0; i < d; i++) {
                x[(size_t)g * 2 * d + i] = fx_encode(c->k[(size_t)g * d + i], c->frac);
                x[(size_t)g * 2 * d + d + i] = fx_encode(c->v[(size_t)g * d + i], c->frac);
            }
        return 0;
    }
    uint32_t cols = what == PCHECK_IN_KV ? 2 * d : d;
    if (T->batch != Hkv || T->cols != cols)
        return cant(c, "its operand %s is not n_kv_heads x rows x (2·)head_dim", T->name, layer);
    uint32_t r0 = what == PCHECK_IN_KV || phase == PHASE_PREFILL ? 0 : kv_len;
    /* the cache's rows past kv_len (a policy's padding to whole pages) are empty */
    uint32_t live = what == PCHECK_IN_KV && T->rows > kv_len ? kv_len : T->rows;
    if (r0 + live > v->max_len)
        return cant(c, "its operand %s has rows past the trace", T->name, layer);
    memset(x, 0, n * sizeof *x);
    for (uint32_t j = 0; j < live; j++) {
        int rc = trace_kv(c->t, layer, r0 + j, c->k, what == PCHECK_IN_KV ? c->v : NULL);
        if (rc)
            return err_set(e, rc, "policy check: the trace's keys of layer %u position %u", layer,
                           r0 + j);
        for (uint32_t g = 0; g < Hkv; g++) {
            uint64_t *row = x + ((size_t)g * T->rows + j) * cols;
            for (uint32_t i = 0; i < d; i++)
                row[i] = fx_encode(c->k[(size_t)g * d + i], c->frac);
            if (what == PCHECK_IN_KV)
                for (uint32_t i = 0; i < d; i++)
                    row[d + i] = fx_encode(c->v[(size_t)g * d + i], c->frac);
        }
    }
    if (what == PCHECK_IN_KV) {
        for (uint32_t g = 0; g < Hkv; g++)
            memcpy(c->kvraw + (size_t)g * live * cols, x + (size_t)g * T->rows * cols,
                   (size_t)live * cols * sizeof *x);
        c->kv_rows = live;
    }
    return 0;
}

/* The value of a public tensor of a policy's ops: a column of ones ("ones", "<x>_ones"), zeros
 * ("<x>_zero"), a padding bias ("<x>_pad<K>": 0 on elements [0, K) of each instance;
 * "<x>_pad<J>to<K>": on [J, K)). */
static int bind_public(const op_tensor *T, int frac, uint64_t *x, size_t n)
{
    size_t len = strlen(T->name);
    if (len >= 5 && !strcmp(T->name + len - 5, "_zero")) {
        memset(x, 0, n * sizeof *x);
        return 1;
    }
    if (len >= 4 && !strcmp(T->name + len - 4, "_tri")) {
        size_t C = T->cols ? T->cols : 1, per = (size_t)T->rows * C;
        for (size_t i = 0; i < n; i++)
            x[i] = per && (i % per) / C <= i % C;
        return 1;
    }
    const char *pad = strrchr(T->name, '_');
    if (pad && !strncmp(pad, "_pad", 4) && pad[4] >= '0' && pad[4] <= '9') {
        char *end;
        size_t J = 0, K = strtoul(pad + 4, &end, 10);
        size_t per = (size_t)T->rows * (T->cols ? T->cols : 1);
        if (!strncmp(end, "to", 2) && end[2] >= '0' && end[2] <= '9')
            J = K, K = strtoul(end + 2, NULL, 10);
        uint64_t big = fx_encode(-PCHECK_PAD_BIAS, frac);
        for (size_t i = 0; i < n; i++)
            x[i] = per && (i % per < J || i % per >= K) ? big : 0;
        return 1;
    }
    if (len < 4 || strcmp(T->name + len - 4, "ones"))
        return 0;
    for (size_t i = 0; i < n; i++)
        x[i] = 1;
    return 1;
}

/* The ops' kept set of KV head g at kv_len into c->got; 0, or 1 with r->msg on a row that
 * gathers no cached entry. A row its score bias (bias, or NULL) takes out of the attention is
 * none of the kept (a partial page's padding, or a public entry's row the step attends apart). */
static int sel_mask(chk *c, const pcheck_io *io, const mpc_val *sel, const op_tensor *T,
                    const mpc_val *bias, uint32_t layer, uint32_t kv_len, uint32_t g)
{
    uint32_t d2 = 2 * c->env.head_dim, C = T->cols, m = io->sel_m;
    uint8_t *got = c->got + (size_t)g * kv_len;
    for (uint32_t j = 0; j < kv_len; j++)
        got[j] = j < io->sel_r0 || j >= io->sel_r1;
    if (C > d2 || !c->kv_rows) {
        c->r->match = 0;
        snprintf(c->r->msg, sizeof c->r->msg,
                 "layer %u position %u: its selection %s is not a gather of the cached [K | V] "
                 "rows (its in.kv operand)",
                 layer, kv_len, T->name);
        return 1;
    }
    for (uint32_t i = 0; i < m; i++) {
        const uint64_t *row = sel->s[0] + ((size_t)g * m + i) * C;
        int zero = 1;
        for (uint32_t q = 0; q < C && zero; q++)
            zero = row[q] == 0;
        size_t per = bias ? bias->n / c->env.n_kv_heads : 0; /* its first m: query head 0 */
        if (zero || (bias && i < per &&
                     fx_decode(bias->s[0][(size_t)g * per + i], c->frac) < -PCHECK_PAD_BIAS / 2))
            continue; /* an empty slot, or one biased out */
        uint32_t hit = UINT32_MAX;
        for (uint32_t j = io->sel_r0; j < io->sel_r1 && j < c->kv_rows && hit == UINT32_MAX; j++)
            if (!got[j] &&
                !memcmp(row, c->kvraw + ((size_t)g * c->kv_rows + j) * d2, C * sizeof *row))
                hit = j;
        if (hit == UINT32_MAX) {
            c->r->match = 0;
            snprintf(c->r->msg, sizeof c->r->msg,
                     "layer %u, KV head %u, position %u: row %u of its selection %s is none of "
                     "the candidate entries [%u, %u) (a mixture, or gathered twice)",
                     layer, g, kv_len, i, T->name, io->sel_r0, io->sel_r1);
            return 1;
        }
        got[hit] = 1;
    }
    return 0;
}

/* The ops' kept set c->got of KV head g against select()'s want: equal, or different only by
 * ties: as many entries kept by one side only as by the other, all candidates, and the ops'
 * scores of all of them within the stated tolerance of each other; under a threshold
 * (pcheck_selection_threshold), all candidates whose ops' scores lie within it of the
 * threshold, whatever the counts. 0, or 1 with r->msg. */
static int compare(chk *c, const pcheck_io *io, const mpc_val *score, const uint8_t *want,
                   uint32_t layer, uint32_t kv_len, uint32_t g)
{
    uint32_t first = UINT32_MAX, n_want = 0, n_got = 0;
    const uint8_t *got = c->got + (size_t)g * kv_len;
    double lo = 0, hi = 0; /* the ops' scores of the entries one side only kept */
    double far = 0;        /* under a threshold: their largest distance from it */
    int scored = score && io->sel_score != OP_NONE && io->sel_r1 > io->sel_r0 &&
                 score->n == (size_t)c->env.n_kv_heads * (io->sel_r1 - io->sel_r0);
    for (uint32_t j = 0; j < kv_len; j++) {
        if (!want[j] == !got[j])
            continue;
        int cand = j >= io->sel_r0 && j < io->sel_r1;
        if (!scored || !cand) {
            first = j;
            n_want = UINT32_MAX; /* not a tie: no score, or a public entry */
            break;
        }
        double v =
            fx_decode(score->s[0][(size_t)g * (io->sel_r1 - io->sel_r0) + j - io->sel_r0], c->frac);
        lo = first == UINT32_MAX || v < lo ? v : lo;
        hi = first == UINT32_MAX || v > hi ? v : hi;
        far = fabs(v - io->sel_thr) > far ? fabs(v - io->sel_thr) : far;
        if (first == UINT32_MAX)
            first = j;
        n_want += want[j] != 0;
        n_got += want[j] == 0;
    }
    if (first == UINT32_MAX)
        return 0;
    if (n_want != UINT32_MAX && io->has_thr) {
        n_got = far <= io->sel_tol ? n_want : n_want + 1;
        lo = 0, hi = far;
    }
    if (n_want != UINT32_MAX && n_want == n_got && hi - lo <= io->sel_tol) {
        c->r->n_ties++;
        if (hi - lo > c->r->tie_gap)
            c->r->tie_gap = hi - lo;
        return 0;
    }
    c->r->match = 0;
    snprintf(c->r->msg, sizeof c->r->msg,
             "layer %u, KV head %u, decode position %u: entry %u is kept by %s and not by %s%s",
             layer, g, kv_len, first, want[first] ? "select()" : "its ops",
             want[first] ? "its ops" : "select()",
             n_want != UINT32_MAX && (n_want == n_got || io->has_thr) && scored
                 ? " (more than its stated tolerance apart: not a tie)"
                 : "");
    return 1;
}

/* A difference compare() does not accept may be a choice the ops broke otherwise among tied
 * candidates and that the policy carries on (policy_ops.choice): stage 1's set when the ops name
 * one (pcheck_selection_stage), else the kept set itself. The ops' set is accepted when it keeps
 * as many of the choice's candidates as the policy's, per KV head, and the policy's own scores
 * of every candidate only one side kept lie within the choice's tol of each other: a top-k of
 * those scores up to ties (either way: a choice better than the policy's own is no tie either).
 * The policy then adopts the ops' set and select() runs again from it into c->keep. 1: adopted
 * (*n_diff masks differed, *gap their largest score spread); 0: not a tie of a carried choice,
 * or an error in *rc. */
static int carry(chk *c, const pcheck_io *io, const mpc_val *stage, uint32_t layer, uint32_t kv_len,
                 size_t *n_diff, double *gap, int *rc, errbuf *e)
{
    const policy_ops *p = c->p;
    uint32_t Hkv = c->env.n_kv_heads, which = io->has_stage && stage ? 1 : 0;
    policy_choice ch = {0};
    if (!p->choice || !p->adopt || p->choice(c->st, layer, kv_len, which, &ch) != 1 || !ch.score ||
        !ch.kept || !ch.n)
        return 0;
    const uint8_t *ops = c->got;
    if (which) {
        if (stage->n != (size_t)Hkv * ch.n || ch.n > c->env.max_len)
            return 0;
        for (size_t i = 0; i < stage->n; i++)
            c->alt[i] = stage->s[0][i] != 0;
        ops = c->alt;
    } else if (ch.n != kv_len)
        return 0;
    size_t nd = 0;
    double worst = 0;
    for (uint32_t g = 0; g < Hkv; g++) {
        const float *sc = ch.score + g * ch.head_stride;
        const uint8_t *pk = ch.kept + g * ch.head_stride, *ok = ops + (size_t)g * ch.n;
        uint32_t n_ops = 0, n_pol = 0;
        double lo = 0, hi = 0; /* the policy's scores of the candidates one side only kept */
        for (uint32_t j = 0; j < ch.n; j++) {
            if (!ok[j] == !pk[j])
                continue;
            lo = n_ops + n_pol && lo < sc[j] ? lo : sc[j];
            hi = n_ops + n_pol && hi > sc[j] ? hi : sc[j];
            n_ops += ok[j] != 0;
            n_pol += pk[j] != 0;
        }
        if (n_ops != n_pol || !(hi - lo <= ch.tol))
            return 0;
        if (n_ops) {
            nd++;
            worst = hi - lo > worst ? hi - lo : worst;
        }
    }
    if (!nd) /* the choice agrees: the difference lies elsewhere */
        return 0;
    if ((*rc = p->adopt(c->st, layer, kv_len, which, ops, e)) ||
        (*rc = p->select(c->st, layer, kv_len, trace_q(c->t, layer), c->keep, e)))
        return 0;
    *n_diff = nd;
    *gap = worst;
    return 1;
}

/* The ops' kept sets c->got of a decode step against select()'s c->keep, every KV head
 * (compare), a difference there tried as a tie carried in the policy's state (carry) and the
 * comparison rerun from the adopted choice. 0, or 1 with r->msg (the first difference as
 * found) or an error in *rc. */
static int compare_step(chk *c, const pcheck_io *io, const mpc_val *score, const mpc_val *stage,
                        uint32_t layer, uint32_t kv_len, int *rc, errbuf *e)
{
    uint32_t Hkv = c->env.n_kv_heads;
    size_t ties = c->r->n_ties;
    double tie_gap = c->r->tie_gap;
    int bad = 0;
    for (uint32_t g = 0; g < Hkv && !bad; g++)
        bad = compare(c, io, score, c->keep + (size_t)g * kv_len, layer, kv_len, g);
    policy_choice ch = {0};
    if (!bad && c->r->n_ties > ties && c->p->choice && c->p->adopt &&
        c->p->choice(c->st, layer, kv_len, 0, &ch) == 1 && ch.n == kv_len &&
        !(*rc = c->p->adopt(c->st, layer, kv_len, 0, c->got, e)))
        /* a tie the ops broke otherwise in a choice the policy carries: from the ops' set on */
        *rc = c->p->select(c->st, layer, kv_len, trace_q(c->t, layer), c->keep, e);
    if (!bad)
        return 0;
    char msg[sizeof c->r->msg];
    memcpy(msg, c->r->msg, sizeof msg);
    size_t nd = 0;
    double gap = 0;
    if (!carry(c, io, stage, layer, kv_len, &nd, &gap, rc, e))
        return 1;
    c->r->match = 1;
    c->r->n_ties = ties;
    c->r->tie_gap = tie_gap;
    bad = 0;
    for (uint32_t g = 0; g < Hkv && !bad; g++)
        bad = compare(c, io, score, c->keep + (size_t)g * kv_len, layer, kv_len, g);
    if (bad) {
        c->r->match = 0;
        memcpy(c->r->msg, msg, sizeof msg);
        return 1;
    }
    c->r->n_carried += nd;
    c->r->carry_gap = gap > c->r->carry_gap ? gap : c->r->carry_gap;
    return 0;
}

/* Runs prog on the plain engine with its operands and state bound; at a decode step compares
 * the named selection with c->keep. 0: go on; 1: stop (r filled). */
static int run_prog(chk *c, op_program *prog, const pcheck_io *io, int phase, uint32_t layer,
                    uint32_t kv_len, errbuf *e)
{
    eng *E = c->E;
    mpc_val *vals = calloc(prog->n_tens + 1, sizeof *vals);
    uint8_t *made = calloc(prog->n_tens + 1, 1);
    int rc = vals && made ? MS_OK : MS_ERR_NOMEM, stop = 0;
    for (size_t i = 0; !rc && i < prog->n_ops; i++)
        if (prog->ops[i].out < prog->n_tens && prog->ops[i].kind != OP_INPUT)
            made[prog->ops[i].out] = 1;
    /* a selection naming state its ops update: the rows it held as the step began */
    int upd = !rc && io->has_sel && io->sel_t < prog->n_tens && made[io->sel_t] &&
              prog->tens[io->sel_t].role == OPT_CACHE;
    const saved *s0 = upd ? find_saved(c, prog->tens[io->sel_t].name) : NULL;
    int s0_made = s0 && s0->made;
    uint64_t *snap = NULL;
    size_t n_snap = s0 ? s0->n : 0;
    if (s0 && !(snap = malloc((n_snap ? n_snap : 1) * sizeof *snap)))
        rc = MS_ERR_NOMEM;
    if (snap) {
        memcpy(snap, s0->v, n_snap * sizeof *snap);
        c->sel0 = snap;
        c->sel0_m = io->sel_m;
        c->sel0_c = prog->tens[io->sel_t].cols;
        c->sel0_bias = io->has_bias;
    }
    /* state no op of this program updates (another layer's program may: tova's last layer
     * evicts for every layer): what it holds is what it held as the step began */
    int kept_state = !rc && !upd && phase == PHASE_DECODE && io->has_sel &&
                     io->sel_t < prog->n_tens && prog->tens[io->sel_t].role == OPT_CACHE;
    const saved *ss0 = kept_state ? find_saved(c, prog->tens[io->sel_t].name) : NULL;
    if (ss0 && ss0->made && ss0->n >= (size_t)io->sel_m * prog->tens[io->sel_t].cols) {
        c->sel0 = ss0->v;
        c->sel0_m = io->sel_m;
        c->sel0_c = prog->tens[io->sel_t].cols;
        c->sel0_bias = io->has_bias;
    }
    if (!rc && phase == PHASE_DECODE && io->sel_m &&
        (upd ? !s0_made : kept_state && !(ss0 && ss0->made))) {
        /* before operands that follow it (a selection of no rows needs no op) */
        c->r->match = 0;
        stop = 1;
        snprintf(c->r->msg, sizeof c->r->msg,
                 "layer %u position %u: its selection %s is computed by none of its ops (no "
                 "gather)",
                 layer, kv_len, prog->tens[io->sel_t].name);
    }
    for (uint32_t t = 0; !rc && !stop && t < prog->n_tens; t++) {
        const op_tensor *T = &prog->tens[t];
        size_t n = (size_t)T->batch * T->rows * T->cols;
        vals[t].n = n;
        vals[t].dom = T->dom;
        if ((rc = E->vt->alloc(E, &vals[t], n, T->dom)))
            break;
        if (made[t] && T->role != OPT_CACHE) /* state: the ops update what it held */
            continue;
        int what = -1;
        for (size_t i = 0; i < io->n_in; i++)
            if (io->in_t[i] == t)
                what = io->in_what[i];
        if (what >= 0) {
            int x = bind_input(c, what, T, layer, phase, kv_len, vals[t].s[0], e);
            if (x > 0)
                rc = x;
            stop = x < 0;
        } else if (T->role == OPT_CACHE) {
            saved *s = find_saved(c, T->name);
            if (s && s->n == n)
                memcpy(vals[t].s[0], s->v, n * sizeof *s->v);
        } else if (T->role == OPT_PUBLIC) {
            if (!bind_public(T, pcheck_frac_bits(), vals[t].s[0], n))
                stop = !!cant(c, "its public operand %s holds no value the check knows", T->name,
                              layer);
        } else if (T->role == OPT_WEIGHT) {
            stop = !!cant(c, "its operand %s is a weight of its own, which the check cannot bind",
                          T->name, layer);
        } else {
            /* an operand computed by no op and given by no one: a placeholder */
            int used = 0;
            for (size_t i = 0; i < prog->n_ops && !used; i++)
                for (int q = 0; q < 3; q++)
                    used |= prog->ops[i].in[q] == t;
            if (used)
                stop = !!cant(c,
                              "its ops read %s, which no op computes and mpcsim does not provide "
                              "(a placeholder: take it from api->input / pcheck_input)",
                              T->name, layer);
        }
    }
    for (size_t i = 0; !rc && !stop && i < prog->n_ops; i++) {
        e->msg[0] = '\0';
        int x = kern_exec(E, prog, i, vals, e);
        c->r->n_ops++;
        if (x == MS_ERR_NOMEM)
            rc = x;
        else if (x) { /* an op its own program cannot run: the program, not the check, is wrong */
            const op *o = &prog->ops[i];
            c->r->ran = 0;
            stop = 1;
            snprintf(
                c->r->msg, sizeof c->r->msg,
                "layer %u: its op %zu (%s, result %s) does not run on the plain engine%s%.300s",
                layer, i, op_kind_name(o->kind),
                o->out < prog->n_tens ? prog->tens[o->out].name : "none",
                e->msg[0] ? ": " : " (its shapes disagree)", e->msg);
            e->msg[0] = '\0';
        }
    }
    for (uint32_t t = 0; !rc && !stop && t < prog->n_tens; t++)
        if (prog->tens[t].role == OPT_CACHE)
            rc = keep_saved(c, prog->tens[t].name, vals[t].s[0], vals[t].n, made[t]);
    if (!rc && !stop && phase == PHASE_DECODE) {
        uint32_t Hkv = c->env.n_kv_heads;
        /* its selection: computed by an op of this program, or state an op of an earlier
         * one gathered (a one-shot selection: the rows the decode step attends) */
        const saved *ss = io->has_sel && !made[io->sel_t] && prog->tens[io->sel_t].role == OPT_CACHE
                              ? find_saved(c, prog->tens[io->sel_t].name)
                              : NULL;
        /* a selection of no rows (none of its candidates kept) needs no op to compute it */
        if (io->has_sel && io->sel_m && (upd ? !s0_made : !made[io->sel_t] && !(ss && ss->made))) {
            c->r->match = 0;
            stop = 1;
            snprintf(c->r->msg, sizeof c->r->msg,
                     "layer %u position %u: its selection %s is computed by none of its ops (no "
                     "gather)",
                     layer, kv_len, prog->tens[io->sel_t].name);
        }
        if (!stop && io->has_sel &&
            prog->tens[io->sel_t].batch * prog->tens[io->sel_t].rows != Hkv * io->sel_m) {
            c->r->match = 0;
            stop = 1;
            snprintf(c->r->msg, sizeof c->r->msg,
                     "layer %u position %u: its selection %s is not n_kv_heads x %u rows", layer,
                     kv_len, prog->tens[io->sel_t].name, io->sel_m);
        }
        for (uint32_t g = 0; !stop && g < Hkv; g++) {
            mpc_val was = vals[io->has_sel ? io->sel_t : 0];
            if (upd) {
                if (n_snap != was.n) {
                    c->r->match = 0;
                    stop = 1;
                    snprintf(c->r->msg, sizeof c->r->msg,
                             "layer %u position %u: its selection %s held no rows of this shape "
                             "as the step began",
                             layer, kv_len, prog->tens[io->sel_t].name);
                    break;
                }
                was.s[0] = snap;
            }
            if (io->has_sel)
                stop = sel_mask(c, io, &was, &prog->tens[io->sel_t],
                                io->has_bias ? &vals[io->sel_bias] : NULL, layer, kv_len, g);
            else {
                memset(c->got + (size_t)g * kv_len, 1, kv_len);
                uint32_t j = 0;
                while (j < kv_len && c->keep[(size_t)g * kv_len + j])
                    j++;
                if (j < kv_len) { /* select() drops entries its ops never name */
                    c->r->ran = 0;
                    stop = 1;
                    snprintf(c->r->msg, sizeof c->r->msg,
                             "layer %u, decode position %u: select() drops cached entries, and "
                             "its emit_cost names no selection (pcheck_selection; a plug-in's "
                             "api->selection), so its ops cannot be compared",
                             layer, kv_len);
                }
            }
        }
        if (!stop) {
            const mpc_val *sc =
                io->has_sel && io->sel_score < prog->n_tens ? &vals[io->sel_score] : NULL;
            const mpc_val *sg =
                io->has_stage && io->sel_stage < prog->n_tens ? &vals[io->sel_stage] : NULL;
            stop = compare_step(c, io, sc, sg, layer, kv_len, &rc, e);
        }
        if (!stop) {
            c->r->n_checked += Hkv;
            c->r->n_chosen += io->has_sel && io->sel_r0 < io->sel_r1 ? Hkv : 0;
        }
    }
    for (uint32_t t = 0; vals && t < prog->n_tens; t++)
        E->vt->release(E, &vals[t]);
    free(vals);
    free(made);
    free(snap);
    c->sel0 = NULL;
    c->sel0_bias = 0;
    return rc ? rc : stop ? -1 : 0;
}

/* emit_cost for (phase, layer) into a fresh program, then run it. */
static int emit_run(chk *c, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    errbuf *e)
{
    if (!c->p->emit_cost) {
        if (phase == PHASE_DECODE) {
            op_program empty;
            op_program_init(&empty);
            pcheck_io io = {0};
            int rc = run_prog(c, &empty, &io, phase, layer, kv_len, e);
            op_program_free(&empty);
            return rc;
        }
        return 0;
    }
    op_program prog;
    op_program_init(&prog);
    pcheck_io io = {0};
    cur = &io;
    int rc = c->p->emit_cost(c->st, phase, layer, kv_len, kept, &prog, e);
    cur = NULL;
    if (!rc)
        rc = run_prog(c, &prog, &io, phase, layer, kv_len, e);
    op_program_free(&prog);
    return rc;
}

int pcheck_emit(const policy_ops *p, void *st, int phase, uint32_t layer, uint32_t kv_len,
                const uint32_t *kept, op_program *prog, pcheck_decl *io, errbuf *e)
{
    memset(io, 0, sizeof *io);
    if (!p->emit_cost)
        return MS_OK;
    pcheck_io got = {0}, *was = cur;
    cur = &got;
    int rc = p->emit_cost(st, phase, layer, kv_len, kept, prog, e);
    cur = was;
    io->n_in = got.n_in < PCHECK_DECL_MAX ? got.n_in : PCHECK_DECL_MAX;
    for (size_t i = 0; i < io->n_in; i++)
        io->in_t[i] = got.in_t[i], io->in_what[i] = got.in_what[i];
    io->has_sel = got.has_sel;
    io->sel_t = got.sel_t, io->sel_m = got.sel_m, io->sel_r0 = got.sel_r0;
    io->sel_r1 = got.sel_r1, io->sel_score = got.sel_score, io->sel_tol = got.sel_tol;
    io->has_bias = got.has_bias, io->sel_bias = got.sel_bias;
    io->has_stage = got.has_stage, io->sel_stage = got.sel_stage;
    io->has_thr = got.has_thr, io->sel_thr = got.sel_thr;
    return rc;
}

int pcheck_public_value(const op_tensor *T, uint64_t *x, size_t n)
{
    return bind_public(T, pcheck_frac_bits(), x, n);
}

int pcheck_public_value_at(const op_tensor *T, int frac, uint64_t *x, size_t n)
{
    return bind_public(T, frac, x, n);
}

static int gather_k(void *ctx, uint32_t layer, uint32_t g, const uint32_t *idx, size_t n, float *k)
{
    return trace_gather(ctx, layer, g, idx, n, k, NULL);
}

static int get_k(void *ctx, uint32_t layer, uint32_t pos, float *k)
{
    return trace_kv(ctx, layer, pos, k, NULL);
}

/* observe(pos, layer) with the attention renormalized over the kept entries (decode). */
static int observe(chk *c, uint32_t pos, uint32_t layer, int decode, errbuf *e)
{
    if (!c->p->observe)
        return MS_OK;
    const policy_env *v = &c->env;
    unsigned need = c->p->layer_needs ? c->p->layer_needs(c->st, layer, pos)
                    : c->p->needs     ? c->p->needs(c->st, pos)
                                      : 0;
    policy_obs o = {.layer = layer, .pos = pos};
    o.q = trace_q(c->t, layer);
    int rc = MS_OK;
    if (need & (POLICY_NEED_K | POLICY_NEED_V)) {
        rc = trace_kv(c->t, layer, pos, c->k, c->v);
        o.k = c->k;
        o.v = need & POLICY_NEED_V ? c->v : NULL;
    }
    if (!rc && need & POLICY_NEED_ATT) {
        const float *a = trace_att(c->t, layer);
        uint32_t G = v->n_heads / v->n_kv_heads, n = pos + 1;
        memcpy(c->att, a, (size_t)v->n_heads * n * sizeof *a);
        for (uint32_t h = 0; decode && h < v->n_heads; h++) {
            float *row = c->att + (size_t)h * n;
            const uint8_t *kp = c->keep + (size_t)(h / G) * pos;
            double s = row[pos];
            for (uint32_t j = 0; j < pos; j++)
                s += kp[j] ? row[j] : (row[j] = 0);
            for (uint32_t j = 0; s > 0 && j < n; j++)
                row[j] = (float)(row[j] / s);
        }
        o.att = c->att;
    }
    if (!rc && need & POLICY_NEED_FFN)
        o.ffn = trace_ffn(c->t, layer);
    if (!rc && need & POLICY_NEED_WO) {
        uint32_t rr, cc;
        o.wo = trace_wo(c->t, layer, &rr, &cc);
    }
    if (rc)
        return err_set(e, rc, "policy check: the trace at layer %u position %u", layer, pos);
    return c->p->observe(c->st, &o, e);
}

int pcheck_run(const policy_ops *p, const policy_args *a, trace *t, uint32_t P, uint32_t T,
               pcheck_result *r, errbuf *e)
{
    return pcheck_run_dir(p, a, t, NULL, P, T, r, e);
}

int pcheck_run_dir(const policy_ops *p, const policy_args *a, trace *t, const char *dir, uint32_t P,
                   uint32_t T, pcheck_result *r, errbuf *e)
{
    memset(r, 0, sizeof *r);
    r->ran = 1;
    r->match = 1;
    const trace_shape *sh = trace_get_shape(t);
    if (P < 1 || T <= P || T > sh->n_tokens)
        return err_set(e, MS_ERR_INPUT,
                       "policy check: a prompt of %u and %u decode steps do not fit the trace's "
                       "%u tokens\n  hint: a shorter --prompt, or fewer --decode steps",
                       P, T > P ? T - P : 0, sh->n_tokens);
    chk c = {.p = p, .t = t, .r = r};
    c.env = (policy_env){sh->n_layers,
                         sh->n_heads,
                         sh->n_kv_heads,
                         sh->head_dim,
                         sh->dim,
                         sh->ffn_dim,
                         P,
                         T,
                         gather_k,
                         t,
                         get_k,
                         1,
                         dir};
    uint32_t L = sh->n_layers, Hkv = sh->n_kv_heads, d = sh->head_dim;
    proto_cfg cfg;
    int rc = proto_cfg_default("semi2k", &cfg, e);
    if (!rc)
        rc = eng_plain_new(&cfg, 2, 1, 1, &c.E);
    if (rc)
        return rc;
    c.frac = cfg.frac_bits;
    cur_frac = c.frac;
    c.k = calloc((size_t)Hkv * d, sizeof *c.k);
    c.v = calloc((size_t)Hkv * d, sizeof *c.v);
    c.keep = calloc((size_t)Hkv * T, 1);
    c.got = calloc((size_t)Hkv * T, 1);
    c.alt = calloc((size_t)Hkv * T, 1);
    c.att = calloc((size_t)sh->n_heads * T, sizeof *c.att);
    c.kvraw = calloc((size_t)Hkv * T * 2 * d, sizeof *c.kvraw);
    uint32_t *kept = calloc(Hkv, sizeof *kept);
    if (!c.k || !c.v || !c.keep || !c.got || !c.alt || !c.att || !c.kvraw || !kept)
        rc = err_set(e, MS_ERR_NOMEM, "policy check: out of memory");
    if (!rc)
        rc = p->init(&c.env, a, &c.st, e);
    int stop = 0;
    for (uint32_t pos = 0; !rc && !stop && pos < T; pos++) {
        if ((rc = trace_seek(t, pos, e)))
            break;
        if (pos == P) {
            if (p->prefill && (rc = p->prefill(c.st, e)))
                break;
            for (uint32_t g = 0; g < Hkv; g++)
                kept[g] = P;
            for (uint32_t l = 0; !rc && !stop && l < L; l++) {
                int x = emit_run(&c, PHASE_PREFILL, l, P, kept, e);
                rc = x > 0 ? x : 0;
                stop = x < 0 || (!r->ran);
            }
        }
        for (uint32_t l = 0; !rc && !stop && l < L; l++) {
            if (pos >= P) {
                if ((rc = p->select(c.st, l, pos, trace_q(t, l), c.keep, e)))
                    break;
                for (uint32_t g = 0; g < Hkv; g++) {
                    kept[g] = 0;
                    for (uint32_t j = 0; j < pos; j++)
                        kept[g] += c.keep[(size_t)g * pos + j] != 0;
                }
                int x = emit_run(&c, PHASE_DECODE, l, pos, kept, e);
                rc = x > 0 ? x : 0;
                stop = x < 0 || (!r->ran);
                if (rc || stop)
                    break;
            }
            rc = observe(&c, pos, l, pos >= P, e);
        }
    }
    if (rc == MS_ERR_INPUT && !r->ran)
        rc = MS_OK; /* the reason is in r->msg */
    if (c.st)
        p->fini(c.st);
    for (size_t i = 0; i < c.n_sv; i++)
        free(c.sv[i].v);
    free(c.sv);
    free(c.k), free(c.v), free(c.keep), free(c.got), free(c.alt), free(c.att), free(c.kvraw);
    free(kept);
    eng_free(c.E);
    cur_frac = 0;
    if (!rc && r->ran && r->match && !r->n_chosen) {
        r->ran = 0;
        snprintf(r->msg, sizeof r->msg,
                 "its ops chose nothing at these lengths (every entry kept, or attended as "
                 "public): lengthen the decode or lower the budget to check its selection");
    }
    if (!r->ran)
        r->match = 0;
    return rc;
}

const char *const pcheck_checked_names[] = {"snapkv",     "pyramidkv", "quest",
                                            "criticalkv", "tova",      NULL};

pcheck_cost pcheck_cost_of(const policy_ops *p)
{
    if (!p)
        return PCOST_DECLARED;
    if (p->secure)
        return PCOST_SHARES;
    for (size_t i = 0; pcheck_checked_names[i]; i++)
        if (p == policy_find(pcheck_checked_names[i]))
            return PCOST_CHECKED;
    return !p->observe && !p->emit_cost ? PCOST_PUBLIC : PCOST_DECLARED;
}

const char *pcheck_cost_word(const policy_ops *p)
{
    static const policy_ops *seen[POLICY_PLUGIN_MAX]; /* plug-ins checked, their verdicts */
    static int matched[POLICY_PLUGIN_MAX];
    static size_t n_seen;
    switch (pcheck_cost_of(p)) {
    case PCOST_PUBLIC: return "public";
    case PCOST_SHARES: return "shares";
    case PCOST_CHECKED: return "checked";
    case PCOST_DECLARED: break;
    }
    if (p && policy_compose_slot(p) >= 0)
        return "derived";
    if (!p || policy_plugin_slot(p) < 0)
        return "declared";
    for (size_t i = 0; i < n_seen; i++)
        if (seen[i] == p)
            return matched[i] ? "checked" : "declared";
    pcheck_result r = {0};
    errbuf e = {{0}};
    int ok = !pcheck_default(p, &r, &e) && r.ran && r.match;
    if (n_seen < sizeof seen / sizeof seen[0]) {
        seen[n_seen] = p;
        matched[n_seen++] = ok;
    }
    return ok ? "checked" : "declared";
}

int pcheck_default_trace(uint32_t T, trace **t, char *what, size_t cap, errbuf *e)
{
    run_cfg *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    snprintf(cfg->model_ref, sizeof cfg->model_ref, "stories260K");
    snprintf(cfg->trace.source, sizeof cfg->trace.source, "record");
    snprintf(cfg->trace.path, sizeof cfg->trace.path, "%s/tests/data/tinystories_sample.txt",
             mpcsim_datadir());
    cfg->work.prompt_len = T;
    snprintf(what, cap, "stories260K recorded over tests/data/tinystories_sample.txt");
    int rc = trace_open_run(cfg, t, e);
    free(cfg);
    return rc;
}

int pcheck_default(const policy_ops *p, pcheck_result *r, errbuf *e)
{
    policy_args a;
    int rc = policy_args_load(p, NULL, 0, "--param", &a, e);
    trace *t = NULL;
    char what[200];
    if (!rc)
        rc = pcheck_default_trace(64, &t, what, sizeof what, e);
    if (!rc)
        rc = pcheck_run(p, &a, t, 32, 64, r, e);
    trace_close(t);
    return rc;
}

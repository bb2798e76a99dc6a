/* simulate.c — discrete-event simulation of a costed op program on a network.
 *
 * Model (sim/engine/SIMULATION.md):
 *   - Each cost_round r is one communication step of one primitive. Party p issues its rounds
 *     in program order: at issue time I it computes the round's local work for c(p,r) ns
 *     (work / machine rate), then at S = I + c sends its messages.
 *   - A message q→p of b bytes leaves at S(q,r) but queues behind earlier messages on the
 *     same directed link: F = max(S, link free) + b·8/bandwidth, arrival A = F + latency.
 *     A link with a token bucket of depth B (burst_bytes) keeps the same link-free recurrence
 *     (it is when the bucket is full again) and lets the last byte leave B·8/bandwidth earlier,
 *     never before the send: F = max(S, max(S, link free) + b·8/bandwidth − B·8/bandwidth).
 *     With wire framing (net_cfg.wire), b is the bytes the link carries: the payload in TCP
 *     segments with their headers, plus the ACKs of the same round's reverse message.
 *   - Party p is done with round r at D(p,r) = max(S(p,r), arrivals addressed to it).
 *   - Sequential (default, as SPU): I(p,r) = D(p,r−1).
 *     Overlap: I(p,r) = max(S(p,r−1), D(p,r−1) if r−1 is the same op, D of the ops op(r)
 *     reads from). Issue stays in program order, so the CPU and every link are used in the
 *     same order as sequentially and only waits are dropped: an overlapped run is never
 *     slower than the sequential one, and equal to it when every op reads its predecessor.
 *
 * Because issue is in program order and links are FIFO, every time depends only on earlier
 * rounds: one pass over the rounds in program order computes the schedule (the default, about
 * 10 ns per round). opts.event_queue runs the same model as SEND and ARRIVE events on the
 * event engine (des.c) instead; the tests check that both give identical results. The times
 * of every node are kept so the critical path can be walked back from the last event and its
 * time split into compute and communication per op category and layer (the parts tile
 * [0, latency] exactly). */
#include "simulate.h"

#include <assert.h>
#include <jansson.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "des.h"

#define UNSET UINT64_MAX
#define P_MAX MPC_PARTIES_MAX

enum { EV_SEND = 0, EV_ARRIVE = 1 };
#define EV(kind, p, q, r) \
    ((uint64_t)(kind) | ((uint64_t)(p) << 2) | ((uint64_t)(q) << 4) | ((uint64_t)(r) << 6))

/* Predecessor codes of an issue node. */
#define PRED_NONE (-1)

typedef struct sim_ctx {
    const net_cfg *net;
    const op_program *prog;
    const cost_log *log;
    int overlap, P;
    size_t R;
    des *q;

    /* per op */
    size_t *first, *last; /* round range [first, last]; first == SIZE_MAX: no rounds */
    uint32_t (*dep)[4];   /* ops this op reads from (OP_NONE: unused) */
    uint32_t *writer;     /* [tensor] last op writing it, while building dep */
    char *own;            /* the arrays' block when no workspace was given */
    uint64_t *odone;      /* [op*P + p] time op is done at p (UNSET) */
    int64_t *odone_r;     /* round whose D bounds it, -1: none */

    /* per round and party: [r*P + p] */
    uint64_t *comp, *I, *S, *D;
    int32_t *predI;  /* (round << 1) | is_S, or PRED_NONE */
    int8_t *predD;   /* -1: own S; else sender q of the binding arrival */
    uint8_t *rcat;   /* [r] category of the round's op */
    int16_t *rlayer; /* [r] layer of the round's op, -1 none */
    uint8_t *wait;   /* event queue only: messages still to arrive */
    uint8_t *sent;   /* event queue only: round sent */

    /* per round and link: [(r*P + q)*P + p] */
    uint64_t *F;    /* last bit on the wire; arrival = F + the link's latency */
    int32_t *predF; /* previous round on the link, -1: own send */

    /* per party / link state */
    size_t next[P_MAX];
    uint64_t cpu_free[P_MAX];
    uint64_t link_free[P_MAX][P_MAX];
    int64_t link_last[P_MAX][P_MAX];
    double ns_per_byte[P_MAX][P_MAX]; /* 8e9 / bandwidth, as net_transfer_ns */
    uint64_t burst_ns[P_MAX][P_MAX];  /* token bucket depth in ns at the rate; 0: none */
    double nspu[WK_N];                /* ns per unit of local work on one core */
    const machine_profile *mach;      /* threads > 1: the speed-up of each round's work */
    sim_result *res;                  /* stats are added as rounds are run */
    uint64_t last_t;                  /* latest D so far, and its index r*P + p */
    size_t last_i;
    uint64_t lat[P_MAX][P_MAX]; /* link latencies */
    net_wire wire;              /* framing (net.h); wire.mtu 0: payload only */
    uint64_t n_msgs, events;
} sim_ctx;

/* Arrival of message m = (r, q→p). */
#define ARRIVAL(c, m, q, p) ((c)->F[m] + (c)->lat[q][p])

static inline uint64_t ser_ns(const sim_ctx *c, int s, int d, uint64_t bytes)
{
    double ns = (double)bytes * c->ns_per_byte[s][d];
    return ns >= (double)NET_NS_MAX ? NET_NS_MAX : (uint64_t)(ns + 0.5);
}

/* Bytes on link p→d for round cr's message: the payload, or with wire framing its frames and
 * the ACKs of the reverse message interleaved with it (net_wire_bytes). */
static inline uint64_t link_bytes(const net_wire *w, const cost_round *cr, int p, int d)
{
    uint64_t b = cr->bytes[p][d];
    return w->mtu ? net_wire_bytes(w, b, cr->bytes[d][p]) : b;
}

/* Last byte of a message sent at now on a link whose bucket is full again at free, taking
 * ser ns at the rate, with a bucket of burst ns (SIMULATION.md, "Token-bucket links"): the
 * bucket is full again at x = max(now, free) + ser (the serializing link's finish), and the
 * last byte leaves burst ns before that, but not before now. burst 0: F = x. */
static inline uint64_t bucket_finish(uint64_t now, uint64_t free, uint64_t ser, uint64_t burst,
                                     uint64_t *full)
{
    uint64_t x = (free > now ? free : now) + ser;
    *full = x;
    return x - now > burst ? x - burst : now;
}

/* ---- setup ------------------------------------------------------------------------------- */

struct sim_ws {
    char *buf;
    size_t cap;
};

sim_ws *sim_ws_new(void) { return calloc(1, sizeof(sim_ws)); }

void sim_ws_free(sim_ws *w)
{
    if (w)
        free(w->buf);
    free(w);
}

/* Carves every per-run array out of one block at base (or only sizes it when base is NULL). */
static size_t layout(sim_ctx *c, char *base, size_t NO, size_t NT, size_t R, int P)
{
    size_t off = 0, RP = R * P + 1, RPP = R * P * P + 1;
#define CARVE(field, count)                                     \
    do {                                                        \
        if (base)                                               \
            c->field = (void *)(base + off);                    \
        off += ((count) * sizeof *c->field + 15) & ~(size_t)15; \
    } while (0)
    CARVE(first, NO + 1);
    CARVE(last, NO + 1);
    CARVE(dep, NO + 1);
    CARVE(writer, NT + 1);
    CARVE(odone, NO * P + 1);
    CARVE(odone_r, NO * P + 1);
    CARVE(comp, RP);
    CARVE(I, RP);
    CARVE(S, RP);
    CARVE(D, RP);
    CARVE(predI, RP);
    CARVE(F, RPP);
    CARVE(predF, RPP);
    CARVE(rcat, R + 1);
    CARVE(rlayer, R + 1);
    CARVE(predD, RP);
#undef CARVE
    return off;
}

static void ctx_free(sim_ctx *c)
{
    des_free(c->q);
    free(c->wait);
    free(c->sent);
    free(c->own);
}

/* ns per unit of work on one core: 1e9 / rate */
static void ns_per_unit(const machine_profile *m, double out[WK_N])
{
    for (int k = 0; k < WK_N; k++)
        out[k] = 1e9 / m->rate[k];
}

/* A round's local work in ns: one core's time of each kind, divided by its speed-up on the
 * profile's cores (machine_speedup; mach NULL: one core). */
static uint64_t compute_ns(const double nspu[WK_N], const machine_profile *mach, const double *work)
{
    double s = 0;
    if (mach)
        for (int k = 0; k < WK_N; k++)
            s += work[k] * nspu[k] / machine_speedup(mach, k, work[k]);
    else
        for (int k = 0; k < WK_N; k++)
            s += work[k] * nspu[k];
    return s >= (double)NET_NS_MAX ? NET_NS_MAX : (uint64_t)(s + 0.5); /* nearest ns */
}

/* Dependencies: the last writer of each operand and of the result (write after write). */
static void build_deps(sim_ctx *c)
{
    const op_program *pg = c->prog;
    uint32_t *writer = c->writer;
    for (size_t t = 0; t < pg->n_tens; t++)
        writer[t] = OP_NONE;
    for (size_t i = 0; i < pg->n_ops; i++) {
        const op *o = &pg->ops[i];
        int nd = 0;
        uint32_t ts[4] = {o->in[0], o->in[1], o->in[2], o->out};
        for (int k = 0; k < 4; k++)
            c->dep[i][k] = OP_NONE;
        for (int k = 0; k < 4; k++) {
            if (ts[k] == OP_NONE || ts[k] >= pg->n_tens || writer[ts[k]] == OP_NONE)
                continue;
            uint32_t w = writer[ts[k]];
            int dup = 0;
            for (int j = 0; j < nd; j++)
                dup |= c->dep[i][j] == w;
            if (!dup)
                c->dep[i][nd++] = w;
        }
        if (o->out != OP_NONE && o->out < pg->n_tens)
            writer[o->out] = (uint32_t)i;
    }
}

static int check_inputs(const net_cfg *net, const machine_profile *mach, int P, errbuf *e)
{
    if (P < 1 || P > P_MAX || net->n_parties != P)
        return err_set(e, MS_ERR_INPUT, "simulate: the cost log has %d parties, the network %d", P,
                       net->n_parties);
    for (int k = 0; k < WK_N; k++)
        if (!(mach->rate[k] > 0) || !isfinite(mach->rate[k]))
            return err_set(e, MS_ERR_INPUT, "simulate: machine profile '%s' has a rate <= 0",
                           mach->name);
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++)
            if (s != d && !(net->link[s][d].bandwidth_bps >= NET_BW_MIN_BPS &&
                            net->link[s][d].bandwidth_bps <= NET_BW_MAX_BPS))
                return err_set(e, MS_ERR_INPUT,
                               "simulate: link %d->%d has a bandwidth of %g "
                               "bps, outside %g..%g",
                               s, d, net->link[s][d].bandwidth_bps, NET_BW_MIN_BPS, NET_BW_MAX_BPS);
    return net_wire_check(&net->wire, e);
}

/* Points the per-run arrays into the workspace (grown if needed) or a block of our own. */
static int ctx_alloc(sim_ctx *c, sim_ws *ws, errbuf *e)
{
    size_t NO = c->prog->n_ops, NT = c->prog->n_tens;
    size_t need = layout(c, NULL, NO, NT, c->R, c->P);
    char *base;
    if (ws) {
        if (ws->cap < need) {
            free(ws->buf);
            ws->cap = 0;
            if (!(ws->buf = malloc(need + need / 4)))
                return err_set(e, MS_ERR_NOMEM, "simulate: out of memory (%zu rounds)", c->R);
            ws->cap = need + need / 4;
        }
        base = ws->buf;
    } else if (!(base = c->own = malloc(need))) {
        return err_set(e, MS_ERR_NOMEM, "simulate: out of memory (%zu rounds)", c->R);
    }
    layout(c, base, NO, NT, c->R, c->P);
    return MS_OK;
}

static void init_ops(sim_ctx *c)
{
    size_t NO = c->prog->n_ops;
    for (size_t i = 0; i < NO; i++)
        c->first[i] = c->last[i] = SIZE_MAX;
    if (!c->overlap) /* op_done is for overlap only */
        return;
    for (size_t i = 0; i < NO * c->P; i++) {
        c->odone[i] = UNSET;
        c->odone_r[i] = -1;
    }
}

/* Round r's op range entry, compute times and unset node times; checks program order. Called
 * for every round before the event queue runs, or just before round r in the one-pass run. */
static int prep_round(sim_ctx *c, size_t r, errbuf *e)
{
    const cost_round *cr = &c->log->r[r];
    size_t NO = c->prog->n_ops;
    if (cr->op >= NO)
        return err_set(e, MS_ERR_INTERNAL, "simulate: round %zu names op %u of %zu", r, cr->op, NO);
    if (r > 0 && cr->op < c->log->r[r - 1].op)
        return err_set(e, MS_ERR_INTERNAL,
                       "simulate: cost log not in program order "
                       "(round %zu: op %u after op %u)",
                       r, cr->op, c->log->r[r - 1].op);
    if (c->first[cr->op] == SIZE_MAX)
        c->first[cr->op] = r;
    c->last[cr->op] = r;
    const op *o = &c->prog->ops[cr->op];
    c->rcat[r] = o->cat < OPC_N ? o->cat : OPC_OTHER;
    c->rlayer[r] = (o->layer >= 0 && (size_t)o->layer < c->res->n_layers) ? o->layer : -1;
    for (int p = 0; p < c->P; p++) {
        size_t i = r * c->P + p;
        c->comp[i] = compute_ns(c->nspu, c->mach, cr->work[p]);
        c->I[i] = c->S[i] = c->D[i] = UNSET;
        c->predI[i] = PRED_NONE;
        c->predD[i] = -1;
    }
    return MS_OK;
}

static int ctx_init(sim_ctx *c, const net_cfg *net, const machine_profile *mach,
                    const op_program *prog, const cost_log *log, int overlap, sim_ws *ws, errbuf *e)
{
    memset(c, 0, sizeof *c);
    c->net = net;
    c->prog = prog;
    c->log = log;
    c->overlap = overlap;
    c->P = log->n_parties;
    c->R = log->n;
    int rc = check_inputs(net, mach, c->P, e);
    if (rc == MS_OK && c->R >= (1u << 30))
        rc = err_set(e, MS_ERR_RANGE, "simulate: %zu rounds in one step (at most 2^30)", c->R);
    if (rc == MS_OK)
        rc = ctx_alloc(c, ws, e);
    if (rc != MS_OK)
        return rc;
    if (overlap)
        build_deps(c); /* only overlap reads dependencies */
    init_ops(c);
    ns_per_unit(mach, c->nspu);
    c->mach = mach->threads > 1 ? mach : NULL;
    for (int s = 0; s < c->P; s++)
        for (int d = 0; d < c->P; d++) {
            c->link_last[s][d] = -1;
            c->ns_per_byte[s][d] = s == d ? 0 : 8e9 / net->link[s][d].bandwidth_bps;
            c->burst_ns[s][d] = s == d ? 0 : ser_ns(c, s, d, net->link[s][d].burst_bytes);
            c->lat[s][d] = net->link[s][d].latency_ns;
        }
    c->wire = net->wire;
    return MS_OK;
}

/* ---- the event loop ---------------------------------------------------------------------- */

/* Time op j is done at party p (UNSET if not yet known); ops without rounds are done when the
 * ops they read from are. */
static uint64_t op_done(sim_ctx *c, int p, uint32_t j, int64_t *bound_r)
{
    size_t k = (size_t)j * c->P + p;
    if (c->odone[k] != UNSET) {
        *bound_r = c->odone_r[k];
        return c->odone[k];
    }
    if (c->first[j] != SIZE_MAX) {
        uint64_t d = c->D[c->last[j] * c->P + p];
        if (d == UNSET)
            return UNSET;
        c->odone[k] = d;
        c->odone_r[k] = (int64_t)c->last[j];
        *bound_r = c->odone_r[k];
        return d;
    }
    uint64_t t = 0;
    int64_t br = -1;
    for (int i = 0; i < 4 && c->dep[j][i] != OP_NONE; i++) {
        int64_t r2;
        uint64_t d = op_done(c, p, c->dep[j][i], &r2);
        if (d == UNSET)
            return UNSET;
        if (br < 0 || d > t) {
            t = d;
            br = r2;
        }
    }
    c->odone[k] = t;
    c->odone_r[k] = br;
    *bound_r = br;
    return t;
}

/* Issue time of party p's round r, or UNSET while a round it waits for is not done. The
 * binding predecessor goes to *pred: (round << 1) | 1 for S(p, round), round << 1 for
 * D(p, round), PRED_NONE for time 0. Ties keep the CPU chain, then the earlier candidate. */
static uint64_t issue_time(sim_ctx *c, int p, size_t r, int32_t *pred)
{
    int P = c->P;
    uint64_t t = 0;
    *pred = PRED_NONE;
    if (r > 0) {
        t = c->cpu_free[p];
        *pred = (int32_t)(((r - 1) << 1) | 1);
    }
    uint32_t o = c->log->r[r].op;
    if (r > 0 && (!c->overlap || c->first[o] != r)) {
        uint64_t d = c->D[(r - 1) * P + p];
        if (d == UNSET)
            return UNSET;
        if (d >= t) {
            t = d;
            *pred = (int32_t)((r - 1) << 1);
        }
    } else if (c->overlap) {
        for (int i = 0; i < 4 && c->dep[o][i] != OP_NONE; i++) {
            int64_t br;
            uint64_t d = op_done(c, p, c->dep[o][i], &br);
            if (d == UNSET)
                return UNSET;
            if (br >= 0 && d > t) {
                t = d;
                *pred = (int32_t)(br << 1);
            }
        }
    }
    return t;
}

static void issue(sim_ctx *c, int p, size_t r, uint64_t t, int32_t pred)
{
    size_t i = r * c->P + p;
    c->I[i] = t;
    c->predI[i] = pred;
    c->S[i] = t + c->comp[i];
    c->cpu_free[p] = c->S[i];
    c->next[p] = r + 1;
}

/* Puts party p's messages of round r on their links at time now = S(p, r). Each directed
 * link has one sender, whose sends are in program order: links serve messages FIFO. */
static void send_msgs(sim_ctx *c, int p, size_t r, uint64_t now)
{
    int P = c->P;
    const cost_round *cr = &c->log->r[r];
    if (!cr->comm)
        return;
    for (int d = 0; d < P; d++) {
        uint64_t b = cr->bytes[p][d];
        if (d == p || b == 0)
            continue;
        size_t m = (r * P + p) * P + d;
        uint64_t full;
        c->F[m] =
            bucket_finish(now, c->link_free[p][d], ser_ns(c, p, d, link_bytes(&c->wire, cr, p, d)),
                          c->burst_ns[p][d], &full);
        /* waiting on the link (or its tokens) binds to the previous message on it; a message
         * the bucket passes at once binds to its own send */
        c->predF[m] = c->link_free[p][d] > now && c->F[m] > now ? (int32_t)c->link_last[p][d] : -1;
        c->link_free[p][d] = full;
        c->link_last[p][d] = (int64_t)r;
        c->n_msgs++;
    }
}

/* D(p, r) = max(S, arrivals addressed to p); the binding predecessor is the own send on a
 * tie, else the latest arrival (lowest sender on a tie). */
static void bind_done(sim_ctx *c, int p, size_t r)
{
    int P = c->P;
    size_t i = r * P + p;
    uint64_t t = c->S[i];
    int from = -1;
    const cost_round *cr = &c->log->r[r];
    if (cr->comm)
        for (int q = 0; q < P; q++) {
            if (q == p || cr->bytes[q][p] == 0)
                continue;
            uint64_t a = ARRIVAL(c, (r * P + q) * P + p, q, p);
            if (a > t) {
                t = a;
                from = q;
            }
        }
    c->D[i] = t;
    c->predD[i] = (int8_t)from;
    if (t > c->last_t) { /* the latest done node, first in (round, party) order on ties */
        c->last_t = t;
        c->last_i = i;
    }
}

/* ---- one pass in program order ------------------------------------------------------------ */

/* Every time depends only on earlier rounds (in-order issue, FIFO links), so one pass over
 * the rounds computes exactly what the event queue does, with no queue. */
static void round_stats(sim_ctx *c, size_t r);

/* Simulated time is kept in 64-bit ns; a program that runs past NET_NS_MAX (2.3 years) is
 * out of range, not wrapped: every single compute and transfer time saturates at it. */
static int time_range_error(errbuf *e)
{
    return err_set(e, MS_ERR_RANGE,
                   "simulate: the program runs past 2^56 ns (2.3 years) of "
                   "simulated time (hint: check the network's bandwidth and the machine's "
                   "rates)");
}

static int run_onepass(sim_ctx *c, errbuf *e)
{
    int P = c->P;
    for (size_t r = 0; r < c->R; r++) {
        int rc = prep_round(c, r, e);
        if (rc != MS_OK)
            return rc;
        for (int p = 0; p < P; p++) {
            int32_t pred;
            uint64_t t = issue_time(c, p, r, &pred);
            if (t == UNSET)
                return err_set(e, MS_ERR_INTERNAL,
                               "simulate: round %zu of party %d not ready "
                               "in program order",
                               r, p);
            issue(c, p, r, t, pred);
        }
        for (int p = 0; p < P; p++)
            send_msgs(c, p, r, c->S[r * P + p]);
        for (int p = 0; p < P; p++)
            bind_done(c, p, r);
        round_stats(c, r);
        if (c->last_t >= NET_NS_MAX)
            return time_range_error(e);
    }
    c->events = (uint64_t)c->R * P + c->n_msgs;
    return MS_OK;
}

/* ---- one pass, sequential ------------------------------------------------------------------ */

static void stats_flush(sim_ctx *c, sim_stats *acc, int cat, int layer)
{
    sim_stats *t[2] = {&c->res->cat[cat], layer >= 0 ? &c->res->layer[layer] : NULL};
    for (int k = 0; k < 2; k++) {
        if (!t[k])
            continue;
        t[k]->rounds += acc->rounds;
        for (int p = 0; p < c->P; p++) {
            t[k]->bytes_sent[p] += acc->bytes_sent[p];
            t[k]->offline_bytes[p] += acc->offline_bytes[p];
        }
    }
    memset(acc, 0, sizeof *acc);
}

/* run_seq_p's running state, copied in from the context and back at the end: in locals,
 * stores to the node arrays cannot be taken for stores to the context's own fields. */
typedef struct seq_state {
    double nspu[WK_N], nspb[P_MAX][P_MAX];
    uint64_t lat[P_MAX][P_MAX], bns[P_MAX][P_MAX];
    uint64_t cpu_free[P_MAX], link_free[P_MAX][P_MAX], last_t, n_msgs;
    int64_t link_last[P_MAX][P_MAX];
    size_t last_i;
    uint32_t cur;   /* the op of the rounds being summed */
    int cat, layer; /* … its category and layer (-1: none) */
    sim_stats acc;  /* … their sums so far */
} seq_state;

#define SEQ_INLINE static inline __attribute__((always_inline))

SEQ_INLINE void seq_load(const sim_ctx *c, seq_state *q)
{
    memset(&q->acc, 0, sizeof q->acc);
    q->cur = UINT32_MAX;
    q->cat = OPC_OTHER, q->layer = -1;
    memcpy(q->nspu, c->nspu, sizeof q->nspu);
    memcpy(q->nspb, c->ns_per_byte, sizeof q->nspb);
    memcpy(q->lat, c->lat, sizeof q->lat);
    memcpy(q->bns, c->burst_ns, sizeof q->bns);
    q->last_t = c->last_t, q->n_msgs = c->n_msgs, q->last_i = c->last_i;
    memcpy(q->cpu_free, c->cpu_free, sizeof q->cpu_free);
    memcpy(q->link_free, c->link_free, sizeof q->link_free);
    memcpy(q->link_last, c->link_last, sizeof q->link_last);
}

SEQ_INLINE void seq_store(sim_ctx *c, const seq_state *q)
{
    memcpy(c->cpu_free, q->cpu_free, sizeof q->cpu_free);
    memcpy(c->link_free, q->link_free, sizeof q->link_free);
    memcpy(c->link_last, q->link_last, sizeof q->link_last);
    c->last_t = q->last_t;
    c->last_i = q->last_i;
    c->n_msgs = q->n_msgs;
}

/* Round r starts op cr->op: the previous op's sums flushed, its rounds' range closed. */
SEQ_INLINE int seq_enter_op(sim_ctx *c, seq_state *q, const cost_round *cr, size_t r, errbuf *e)
{
    const size_t NO = c->prog->n_ops;
    if (cr->op >= NO)
        return err_set(e, MS_ERR_INTERNAL, "simulate: round %zu names op %u of %zu", r, cr->op, NO);
    if (r > 0 && cr->op < q->cur)
        return err_set(e, MS_ERR_INTERNAL,
                       "simulate: cost log not in program order "
                       "(round %zu: op %u after op %u)",
                       r, cr->op, q->cur);
    if (r > 0) {
        stats_flush(c, &q->acc, q->cat, q->layer);
        c->last[q->cur] = r - 1;
    }
    q->cur = cr->op;
    c->first[q->cur] = r;
    const op *o = &c->prog->ops[q->cur];
    q->cat = o->cat < OPC_N ? o->cat : OPC_OTHER;
    q->layer = (o->layer >= 0 && (size_t)o->layer < c->res->n_layers) ? o->layer : -1;
    return MS_OK;
}

/* Every party's issue I and compute end S of round r: I = max(S, D) of round r−1. */
SEQ_INLINE void seq_issue(sim_ctx *c, seq_state *q, const cost_round *cr, size_t r, const int P)
{
    uint64_t *const I = c->I, *const S = c->S, *const D = c->D;
    int32_t *const predI = c->predI;
    size_t base = r * P;
    for (int p = 0; p < P; p++) {
        size_t i = base + p;
        uint64_t comp = compute_ns(q->nspu, c->mach, cr->work[p]);
        uint64_t t = 0;
        int32_t pred = PRED_NONE;
        if (r > 0) {
            t = q->cpu_free[p];
            pred = (int32_t)(((r - 1) << 1) | 1);
            uint64_t d = D[i - P];
            if (d >= t) {
                t = d;
                pred = (int32_t)((r - 1) << 1);
            }
        }
        I[i] = t;
        predI[i] = pred;
        S[i] = t + comp;
        q->cpu_free[p] = t + comp;
    }
}

/* Round r's messages onto their links (token buckets, FIFO): their finish times F. */
SEQ_INLINE void seq_send(sim_ctx *c, seq_state *q, const cost_round *cr, size_t r, const int P)
{
    uint64_t *const S = c->S, *const F = c->F;
    int32_t *const predF = c->predF;
    size_t base = r * P;
    for (int p = 0; p < P; p++) {
        uint64_t now = S[base + p];
        for (int d = 0; d < P; d++) {
            uint64_t b = cr->bytes[p][d];
            if (d == p || b == 0)
                continue;
            size_t m = (base + p) * P + d;
            double ns = (double)link_bytes(&c->wire, cr, p, d) * q->nspb[p][d]; /* as ser_ns */
            uint64_t full,
                fin = bucket_finish(now, q->link_free[p][d],
                                    ns >= (double)NET_NS_MAX ? NET_NS_MAX : (uint64_t)(ns + 0.5),
                                    q->bns[p][d], &full);
            predF[m] = q->link_free[p][d] > now && fin > now ? (int32_t)q->link_last[p][d] : -1;
            F[m] = fin;
            q->link_free[p][d] = full;
            q->link_last[p][d] = (int64_t)r;
            q->n_msgs++;
        }
    }
}

/* Every party's done time D of round r (its compute, or its last message's arrival) and the
 * round's sums. */
SEQ_INLINE void seq_deliver(sim_ctx *c, seq_state *q, const cost_round *cr, size_t r, const int P)
{
    const uint64_t *const S = c->S, *const F = c->F;
    uint64_t *const D = c->D;
    int8_t *const predD = c->predD;
    size_t base = r * P;
    q->acc.rounds += cr->comm;
    for (int u = 0; u < P; u++)
        for (int p = 0; p < P; p++)
            if (p != u)
                q->acc.bytes_sent[u] += cr->bytes[u][p];
    for (int p = 0; p < P; p++) {
        size_t i = base + p;
        uint64_t t = S[i];
        int from = -1;
        if (cr->comm)
            for (int u = 0; u < P; u++) {
                if (u == p || cr->bytes[u][p] == 0)
                    continue;
                uint64_t a = F[(base + u) * P + p] + q->lat[u][p];
                if (a > t) {
                    t = a;
                    from = u;
                }
            }
        D[i] = t;
        predD[i] = (int8_t)from;
        if (t > q->last_t) {
            q->last_t = t;
            q->last_i = i;
        }
        q->acc.offline_bytes[p] += cr->offline[p];
    }
}

/* run_onepass with overlap off, fused into one loop: the same times, predecessors and sums
 * (the statistics are integer sums, added per op instead of per round), without the per-round
 * calls. I(p,r) = max(S(p,r−1), D(p,r−1)), the D on a tie, as issue_time. */
SEQ_INLINE int run_seq_p(sim_ctx *c, errbuf *e, const int P)
{
    const size_t R = c->R;
    const cost_round *lr = c->log->r;
    uint8_t *const rcat = c->rcat;
    int16_t *const rlayer = c->rlayer;
    seq_state q;
    seq_load(c, &q);
    for (size_t r = 0; r < R; r++) {
        const cost_round *cr = &lr[r];
        if (cr->op != q.cur) {
            int rc = seq_enter_op(c, &q, cr, r, e);
            if (rc)
                return rc;
        }
        rcat[r] = (uint8_t)q.cat;
        rlayer[r] = (int16_t)q.layer;
        seq_issue(c, &q, cr, r, P);
        if (cr->comm)
            seq_send(c, &q, cr, r, P);
        seq_deliver(c, &q, cr, r, P);
        if (q.last_t >= NET_NS_MAX) /* every term is below it: no sum has wrapped yet */
            return time_range_error(e);
    }
    if (R > 0) {
        stats_flush(c, &q.acc, q.cat, q.layer);
        c->last[q.cur] = R - 1;
    }
    for (int p = 0; p < P; p++)
        c->next[p] = R;
    seq_store(c, &q);
    c->events = (uint64_t)R * P + q.n_msgs;
    return MS_OK;
}

/* run_seq_p with the party count a constant for the common cases: the loops over parties
 * and links unroll. */
static int run_seq(sim_ctx *c, errbuf *e)
{
    return c->P == 2 ? run_seq_p(c, e, 2) : c->P == 3 ? run_seq_p(c, e, 3) : run_seq_p(c, e, c->P);
}

/* ---- the event queue ---------------------------------------------------------------------- */

/* Issues as many of party p's next rounds as their dependencies allow. */
static int try_issue(sim_ctx *c, int p)
{
    while (c->next[p] < c->R) {
        size_t r = c->next[p];
        int32_t pred;
        uint64_t t = issue_time(c, p, r, &pred);
        if (t == UNSET)
            return 0;
        issue(c, p, r, t, pred);
        if (des_schedule(c->q, c->S[r * c->P + p], EV(EV_SEND, p, 0, r)))
            return -1;
    }
    return 0;
}

static int round_done(sim_ctx *c, int p, size_t r, uint64_t now)
{
    bind_done(c, p, r);
    assert(c->D[r * c->P + p] == now);
    (void)now;
    return try_issue(c, p);
}

static int on_send(sim_ctx *c, int p, size_t r, uint64_t now)
{
    int P = c->P;
    const cost_round *cr = &c->log->r[r];
    send_msgs(c, p, r, now);
    if (cr->comm)
        for (int d = 0; d < P; d++) {
            size_t m = (r * P + p) * P + d;
            if (d != p && cr->bytes[p][d] > 0 &&
                des_schedule(c->q, ARRIVAL(c, m, p, d), EV(EV_ARRIVE, d, p, r)))
                return -1;
        }
    size_t i = r * P + p;
    c->sent[i] = 1;
    return c->wait[i] == 0 ? round_done(c, p, r, now) : 0;
}

static int on_arrive(sim_ctx *c, int p, size_t r, uint64_t now)
{
    size_t i = r * c->P + p;
    assert(c->wait[i] > 0);
    if (--c->wait[i] == 0 && c->sent[i])
        return round_done(c, p, r, now);
    return 0;
}

static int run_events(sim_ctx *c, errbuf *e)
{
    for (size_t r = 0; r < c->R; r++) {
        int rc = prep_round(c, r, e);
        if (rc != MS_OK)
            return rc;
    }
    if (!(c->q = des_new(64)) || !(c->wait = calloc(c->R * c->P + 1, 1)) ||
        !(c->sent = calloc(c->R * c->P + 1, 1)))
        return err_set(e, MS_ERR_NOMEM, "simulate: out of memory");
    for (size_t r = 0; r < c->R; r++) {
        const cost_round *cr = &c->log->r[r];
        for (int p = 0; p < c->P; p++)
            for (int q = 0; q < c->P; q++)
                if (cr->comm && q != p && cr->bytes[q][p] > 0)
                    c->wait[r * c->P + p]++;
    }
    for (int p = 0; p < c->P; p++)
        if (try_issue(c, p))
            return err_set(e, MS_ERR_NOMEM, "simulate: out of memory");
    des_event ev;
    while (des_pop(c->q, &ev)) {
        int kind = (int)(ev.data & 3), p = (int)((ev.data >> 2) & 3);
        size_t r = (size_t)(ev.data >> 6);
        if (ev.time >= NET_NS_MAX)
            return time_range_error(e);
        int rc = kind == EV_SEND ? on_send(c, p, r, ev.time) : on_arrive(c, p, r, ev.time);
        if (rc)
            return err_set(e, MS_ERR_NOMEM, "simulate: out of memory");
    }
    assert(des_is_sane(c->q));
    for (int p = 0; p < c->P; p++)
        if (c->next[p] != c->R)
            return err_set(e, MS_ERR_INTERNAL, "simulate: party %d stalled at round %zu of %zu", p,
                           c->next[p], c->R);
    c->events = des_processed(c->q);
    for (size_t r = 0; r < c->R; r++)
        round_stats(c, r);
    return MS_OK;
}

/* ---- statistics -------------------------------------------------------------------------- */

static void stats_add_round(sim_stats *s, const cost_round *cr, int P)
{
    s->rounds += cr->comm;
    for (int q = 0; q < P; q++) {
        for (int p = 0; p < P; p++)
            if (p != q)
                s->bytes_sent[q] += cr->bytes[q][p];
        s->offline_bytes[q] += cr->offline[q];
    }
}

static void round_stats(sim_ctx *c, size_t r)
{
    const cost_round *cr = &c->log->r[r];
    stats_add_round(&c->res->cat[c->rcat[r]], cr, c->P);
    if (c->rlayer[r] >= 0)
        stats_add_round(&c->res->layer[c->rlayer[r]], cr, c->P);
}

static void attribute(sim_ctx *c, sim_result *res, size_t r, uint64_t ns, int is_comm)
{
    sim_stats *cs = &res->cat[c->rcat[r]];
    sim_stats *ls = c->rlayer[r] >= 0 ? &res->layer[c->rlayer[r]] : NULL;
    if (is_comm) {
        cs->comm_ns += ns;
        res->total.comm_ns += ns;
        if (ls)
            ls->comm_ns += ns;
    } else {
        cs->compute_ns += ns;
        res->total.compute_ns += ns;
        if (ls)
            ls->compute_ns += ns;
    }
}

/* Walks the critical path back from the last done node, attributing each stretch. */
static void critical_path(sim_ctx *c, sim_result *res, int p, size_t r)
{
    int P = c->P;
    enum { N_D, N_S } kind = N_D;
    for (;;) {
        size_t i = r * P + p;
        if (kind == N_D) {
            int q = c->predD[i];
            if (q < 0) {
                kind = N_S;
                continue;
            }
            /* arrival q→p: latency, then serialization back along the link's queue */
            size_t m = (r * P + q) * P + p;
            attribute(c, res, r, c->lat[q][p], 1);
            for (;;) {
                /* serialization: from the send, or from the previous message's last bit */
                int32_t pr = c->predF[m];
                uint64_t from = pr < 0 ? c->S[r * P + q] : c->F[((size_t)pr * P + q) * P + p];
                attribute(c, res, r, c->F[m] - from, 1);
                if (pr < 0)
                    break;
                r = (size_t)pr;
                m = (r * P + q) * P + p;
            }
            p = q;
            kind = N_S;
            continue;
        }
        attribute(c, res, r, c->S[i] - c->I[i], 0);
        int32_t pi = c->predI[i];
        if (pi == PRED_NONE)
            break;
        r = (size_t)(pi >> 1);
        kind = (pi & 1) ? N_S : N_D;
    }
}

/* ---- timeline (Chrome trace JSON) -------------------------------------------------------- */

/* Events are built and escaped by jansson and written one by one (a 7B step has ~10^5), inside
 * a frame written here. Times are µs with ns resolution: each event is printed with the
 * significant digits its largest time needs (integer digits + 3), so 1234.567 stays 1234.567
 * and not 1234.5669999999999. */
static double us(uint64_t ns) { return (double)ns / 1000.0; }

static void tl_emit(FILE *f, json_t *ev, uint64_t max_ns)
{
    int digits = 3;
    for (uint64_t v = max_ns / 1000; v; v /= 10)
        digits++;
    if (digits > 17)
        digits = 17;
    fputs(",\n", f);
    json_dumpf(ev, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits));
    json_decref(ev);
}

static void write_timeline(sim_ctx *c, FILE *f, uint64_t t0)
{
    int P = c->P;
    const op_program *pg = c->prog;
    for (int p = 0; p < P; p++) {
        for (size_t j = 0; j < pg->n_ops; j++) {
            if (c->first[j] == SIZE_MAX)
                continue;
            const op *o = &pg->ops[j];
            uint64_t b = c->I[c->first[j] * P + p], d = c->D[c->last[j] * P + p];
            tl_emit(f,
                    json_pack("{s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:{s:I, s:i, s:I}}", "ph", "X",
                              "pid", p, "tid", 0, "name", op_kind_name(o->kind), "cat",
                              op_cat_name(o->cat), "ts", us(t0 + b), "dur", us(d - b), "args", "op",
                              (json_int_t)j, "layer", o->layer, "rounds",
                              (json_int_t)(c->last[j] - c->first[j] + 1)),
                    t0 + d);
        }
        for (size_t r = 0; r < c->R; r++) {
            size_t i = r * P + p;
            uint64_t comp = c->S[i] - c->I[i]; /* run_seq keeps no comp[] */
            if (comp == 0)
                continue;
            tl_emit(f,
                    json_pack("{s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:{s:I}}", "ph", "X", "pid", p,
                              "tid", 1, "name", "compute", "cat",
                              op_cat_name(pg->ops[c->log->r[r].op].cat), "ts", us(t0 + c->I[i]),
                              "dur", us(comp), "args", "round", (json_int_t)r),
                    t0 + c->S[i]);
        }
    }
    for (size_t r = 0; r < c->R; r++) {
        const cost_round *cr = &c->log->r[r];
        if (!cr->comm)
            continue;
        for (int q = 0; q < P; q++)
            for (int p = 0; p < P; p++) {
                if (p == q || cr->bytes[q][p] == 0)
                    continue;
                size_t m = (r * P + q) * P + p;
                uint64_t ser = ser_ns(c, q, p, link_bytes(&c->wire, cr, q, p)),
                         since = c->F[m] - c->S[r * P + q];
                if (ser > since) /* a bucket passed part of it at once */
                    ser = since;
                char name[48], id[96];
                snprintf(name, sizeof name, "send %" PRIu64 " B", cr->bytes[q][p]);
                snprintf(id, sizeof id, "%" PRIu64 ".%zu.%d.%d", t0, r, q, p);
                uint64_t start = t0 + c->F[m] - ser, arrive = t0 + ARRIVAL(c, m, q, p);
                tl_emit(f,
                        json_pack("{s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:{s:I, s:i}}", "ph", "X",
                                  "pid", q, "tid", 2 + p, "name", name, "cat", "net", "ts",
                                  us(start), "dur", us(ser), "args", "round", (json_int_t)r, "to",
                                  p),
                        start + ser);
                tl_emit(f,
                        json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:f}", "ph", "s", "pid", q, "tid",
                                  2 + p, "name", "msg", "cat", "net", "id", id, "ts", us(start)),
                        start);
                tl_emit(f,
                        json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:f}", "ph", "f", "bp", "e",
                                  "pid", p, "tid", 0, "name", "msg", "cat", "net", "id", id, "ts",
                                  us(arrive)),
                        arrive);
            }
    }
}

static void tl_meta(FILE *f, int first, int pid, int tid, const char *what, const char *name)
{
    json_t *ev = tid < 0 ? json_pack("{s:s, s:i, s:s, s:{s:s}}", "ph", "M", "pid", pid, "name",
                                     what, "args", "name", name)
                         : json_pack("{s:s, s:i, s:i, s:s, s:{s:s}}", "ph", "M", "pid", pid, "tid",
                                     tid, "name", what, "args", "name", name);
    if (!first)
        fputs(",\n", f);
    json_dumpf(ev, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(ev);
}

void sim_timeline_begin(FILE *f, int n_parties)
{
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    char name[32];
    for (int p = 0; p < n_parties; p++) {
        snprintf(name, sizeof name, "P%d", p);
        tl_meta(f, p == 0, p, -1, "process_name", name);
    }
    for (int p = 0; p < n_parties; p++) {
        tl_meta(f, 0, p, 0, "thread_name", "ops");
        tl_meta(f, 0, p, 1, "thread_name", "compute");
        for (int d = 0; d < n_parties; d++)
            if (d != p) {
                snprintf(name, sizeof name, "link to P%d", d);
                tl_meta(f, 0, p, 2 + d, "thread_name", name);
            }
    }
}

void sim_timeline_end(FILE *f) { fprintf(f, "\n]}\n"); }

/* ---- entry points ------------------------------------------------------------------------ */

static int alloc_layers(const op_program *prog, sim_result *res)
{
    size_t nl = 0;
    for (size_t j = 0; j < prog->n_ops; j++)
        if (prog->ops[j].layer >= 0 && (size_t)prog->ops[j].layer + 1 > nl)
            nl = (size_t)prog->ops[j].layer + 1;
    if (nl && !(res->layer = calloc(nl, sizeof *res->layer)))
        return -1;
    res->n_layers = nl;
    return 0;
}

int sim_run(const net_cfg *net, const machine_profile *mach, const op_program *prog,
            const cost_log *log, const sim_opts *opts, sim_result *res, errbuf *e)
{
    memset(res, 0, sizeof *res);
    sim_ctx c;
    int rc = ctx_init(&c, net, mach, prog, log, opts && opts->overlap, opts ? opts->ws : NULL, e);
    c.res = res;
    if (rc == MS_OK && alloc_layers(prog, res))
        rc = err_set(e, MS_ERR_NOMEM, "simulate: out of memory");
    if (rc == MS_OK)
        rc = (opts && opts->event_queue) ? run_events(&c, e)
             : c.overlap                 ? run_onepass(&c, e)
                                         : run_seq(&c, e);
    if (rc != MS_OK) {
        ctx_free(&c);
        sim_result_free(res);
        return rc;
    }
    int P = c.P;
    for (int k = 0; k < OPC_N; k++) {
        res->total.rounds += res->cat[k].rounds;
        for (int p = 0; p < P; p++) {
            res->total.bytes_sent[p] += res->cat[k].bytes_sent[p];
            res->total.offline_bytes[p] += res->cat[k].offline_bytes[p];
        }
    }
    res->latency_ns = c.last_t;
    if (c.R)
        critical_path(&c, res, (int)(c.last_i % P), c.last_i / P);
    assert(res->total.compute_ns + res->total.comm_ns == res->latency_ns);
    res->events = c.events;
    if (opts && opts->timeline)
        write_timeline(&c, opts->timeline, opts->t0_ns);
    ctx_free(&c);
    return MS_OK;
}

void sim_result_free(sim_result *r)
{
    free(r->layer);
    memset(r, 0, sizeof *r);
}

static void stats_add(sim_stats *a, const sim_stats *b)
{
    a->rounds += b->rounds;
    for (int p = 0; p < MPC_PARTIES_MAX; p++) {
        a->bytes_sent[p] += b->bytes_sent[p];
        a->offline_bytes[p] += b->offline_bytes[p];
    }
    a->compute_ns += b->compute_ns;
    a->comm_ns += b->comm_ns;
}

int sim_result_accumulate(sim_result *r, const sim_result *s)
{
    if (s->n_layers > r->n_layers) {
        sim_stats *nl = realloc(r->layer, s->n_layers * sizeof *nl);
        if (!nl)
            return MS_ERR_NOMEM;
        memset(nl + r->n_layers, 0, (s->n_layers - r->n_layers) * sizeof *nl);
        r->layer = nl;
        r->n_layers = s->n_layers;
    }
    r->latency_ns += s->latency_ns;
    stats_add(&r->total, &s->total);
    for (int k = 0; k < OPC_N; k++)
        stats_add(&r->cat[k], &s->cat[k]);
    for (size_t l = 0; l < s->n_layers; l++)
        stats_add(&r->layer[l], &s->layer[l]);
    r->events += s->events;
    return MS_OK;
}

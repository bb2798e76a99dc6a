/* leak.c — the probing attacker: build a trial's workload, serve it, read the probes' timing. */
#include "leak.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

enum { TENANT_VICTIM = 0, TENANT_ATTACKER = 1, TENANT_BACKGROUND = 2 };
#define VICTIM_USER 0u
#define ATTACKER_USER 1u

void leak_params_default(leak_params *p)
{
    *p = (leak_params){.seed = 7,
                       .trials = 32,
                       .candidates = 16,
                       .template_len = 31,
                       .channel = LEAK_TTFT,
                       .background = 0,
                       .background_rate = 0.5,
                       .probe_start_ns = 20000000000ull,
                       .probe_gap_ns = 20000000000ull,
                       .vocab = 32000};
}

const char *leak_channel_name(int c) { return c == LEAK_ORDER ? "order" : "ttft"; }
int leak_channel_from_name(const char *s)
{
    return !strcmp(s, "ttft") ? LEAK_TTFT : !strcmp(s, "order") ? LEAK_ORDER : -1;
}

double leak_bits(double p, uint32_t V)
{
    if (V < 2 || p <= 1.0 / V)
        return 0;
    double b = log2((double)V) + p * log2(p);
    if (p < 1)
        b += (1 - p) * log2((1 - p) / (V - 1));
    return b;
}

/* Distinct candidate tokens, drawn from the top of the vocabulary. */
static void draw_candidates(gsl_rng *r, uint32_t vocab, uint32_t V, uint32_t *cand)
{
    for (uint32_t j = 0; j < V; j++) {
        uint32_t t;
        int dup;
        do {
            t = vocab / 2 + (uint32_t)gsl_rng_uniform_int(r, vocab - vocab / 2);
            dup = 0;
            for (uint32_t q = 0; q < j; q++)
                dup |= cand[q] == t;
        } while (dup);
        cand[j] = t;
    }
}

typedef struct trial_ws {
    uint32_t *tok, *cand, *perm;
    uint8_t *sens;
    size_t cap;
} trial_ws;

/* Builds the trial's workload: background, victim at t = 0, attacker probes (+ blocker). */
/* The victim's prompt: template | secret | private tail; returns its length. */
static uint32_t victim_prompt(const leak_params *lp, gsl_rng *r, const uint32_t *tpl,
                              uint32_t secret_tok, uint32_t *tok, uint8_t *sens)
{
    uint32_t T = lp->template_len, tail = 16 + (uint32_t)gsl_rng_uniform_int(r, 33), n = T;
    memcpy(tok, tpl, T * sizeof *tpl);
    memset(sens, 0, T);
    tok[n] = secret_tok;
    sens[n++] = 1;
    for (uint32_t j = 0; j < tail; j++, n++) {
        tok[n] = (uint32_t)gsl_rng_uniform_int(r, lp->vocab / 2);
        sens[n] = 1;
    }
    return n;
}

enum { PK_VICTIM, PK_PROBE, PK_BLOCKER, PK_BACKGROUND };
typedef struct pend {
    uint64_t t;
    uint32_t kind, arg, order; /* order: submission order, breaks time ties */
} pend;

static int pend_cmp(const void *a, const void *b)
{
    const pend *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Arrivals of one trial: victim at 0, background (Poisson), blocker, probes; time order. */
static pend *trial_events(const leak_params *lp, gsl_rng *r, size_t *n)
{
    uint32_t V = lp->candidates;
    pend *ev = malloc((3 + (size_t)V + lp->background) * sizeof *ev);
    if (!ev)
        return NULL;
    size_t k = 0;
    ev[k++] = (pend){0, PK_VICTIM, 0, 0};
    double t = 0;
    for (uint32_t b = 0; b < lp->background; b++) {
        t += gsl_ran_exponential(r, 1.0 / lp->background_rate);
        ev[k] = (pend){(uint64_t)llround(t * 1e9), PK_BACKGROUND, b, (uint32_t)k};
        k++;
    }
    uint64_t t0 = lp->probe_start_ns;
    if (lp->channel == LEAK_ORDER) { /* blocker: keeps the parties busy while probes queue */
        ev[k] = (pend){t0 - 1, PK_BLOCKER, 0, (uint32_t)k};
        k++;
    }
    for (uint32_t j = 0; j < V; j++, k++)
        ev[k] = (pend){lp->channel == LEAK_ORDER ? t0 : t0 + j * lp->probe_gap_ns, PK_PROBE, j,
                       (uint32_t)k};
    qsort(ev, k, sizeof *ev, pend_cmp);
    *n = k;
    return ev;
}

/* Builds the trial's workload; *first_probe is the index of the first probe request. */
static int build_trial(const leak_params *lp, gsl_rng *r, uint32_t secret, trial_ws *ws,
                       workload *w, uint32_t *first_probe, errbuf *e)
{
    uint32_t T = lp->template_len, V = lp->candidates;
    uint32_t *tpl = ws->tok + ws->cap - T; /* template kept at the end of the buffer */
    for (uint32_t j = 0; j < T; j++)
        tpl[j] = (uint32_t)gsl_rng_uniform_int(r, lp->vocab / 2);
    draw_candidates(r, lp->vocab, V, ws->cand);
    for (uint32_t j = 0; j < V; j++)
        ws->perm[j] = j;
    gsl_ran_shuffle(r, ws->perm, V, sizeof *ws->perm);
    uint32_t n = victim_prompt(lp, r, tpl, ws->cand[secret], ws->tok, ws->sens);
    size_t n_ev;
    pend *ev = trial_events(lp, r, &n_ev);
    if (!ev)
        return err_set(e, MS_ERR_NOMEM, "leak: out of memory");
    int rc = MS_OK;
    uint32_t *buf = ws->tok + n;
    uint8_t *sb = ws->sens + n;
    *first_probe = UINT32_MAX;
    for (size_t a = 0; a < n_ev && !rc; a++) {
        if (ev[a].kind == PK_VICTIM) {
            rc = wl_add(w, ev[a].t, TENANT_VICTIM, VICTIM_USER, 4, ws->tok, ws->sens, n, e);
        } else if (ev[a].kind == PK_PROBE) { /* template | candidate | filler, insensitive */
            if (*first_probe == UINT32_MAX)
                *first_probe = (uint32_t)w->n;
            memcpy(buf, tpl, T * sizeof *tpl);
            buf[T] = ws->cand[ws->perm[ev[a].arg]];
            buf[T + 1] = 7;
            memset(sb, 0, T + 2);
            rc = wl_add(w, ev[a].t, TENANT_ATTACKER, ATTACKER_USER, 1, buf, sb, T + 2, e);
        } else { /* the attacker's blocker, or a background user's request */
            int blk = ev[a].kind == PK_BLOCKER;
            uint32_t len = blk ? 512 : 32 + (uint32_t)gsl_rng_uniform_int(r, 96);
            for (uint32_t j = 0; j < len; j++) {
                buf[j] = (uint32_t)gsl_rng_uniform_int(r, lp->vocab / 2);
                sb[j] = 1;
            }
            rc = wl_add(w, ev[a].t, blk ? TENANT_ATTACKER : TENANT_BACKGROUND,
                        blk ? ATTACKER_USER : 2 + ev[a].arg % 64, 8, buf, sb, len, e);
        }
    }
    free(ev);
    return rc;
}

int leak_trial(const leak_params *lp, const serve_params *sp, const serve_coster *c, uint32_t trial,
               uint32_t secret, double *obs, uint32_t *guess, errbuf *e)
{
    uint32_t V = lp->candidates, T = lp->template_len;
    if (V < 2 || T == 0 || secret >= V || lp->vocab < 4 * V || lp->probe_gap_ns == 0 ||
        lp->probe_start_ns < 2 || (lp->background && !(lp->background_rate > 0)))
        return err_set(e, MS_ERR_RANGE,
                       "leak: need candidates >= 2, template_len >= 1, "
                       "vocab >= 4*candidates, probe_gap > 0, background_rate > 0");
    trial_ws ws = {0};
    ws.cap = (size_t)3 * T + 1024;
    ws.tok = malloc(ws.cap * sizeof *ws.tok);
    ws.sens = malloc(ws.cap);
    ws.cand = malloc(V * sizeof *ws.cand);
    ws.perm = malloc(V * sizeof *ws.perm);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    workload w;
    wl_init(&w);
    serve_result res = {0};
    int rc = MS_OK;
    if (!ws.tok || !ws.sens || !ws.cand || !ws.perm || !r) {
        rc = err_set(e, MS_ERR_NOMEM, "leak: out of memory");
        goto out;
    }
    gsl_rng_set(r, lp->seed * 1000003u + trial);
    uint32_t first = 0;
    if ((rc = build_trial(lp, r, secret, &ws, &w, &first, e)) ||
        (rc = serve_run(sp, &w, c, &res, e)))
        goto out;
    /* probes were added in time order; with the ttft channel that is perm order */
    for (uint32_t j = 0, q = first; j < V; q++) {
        if (w.req[q].tenant != TENANT_ATTACKER || w.req[q].decode_len != 1)
            continue;
        const serve_req_out *o = &res.req[q];
        obs[ws.perm[j++]] =
            lp->channel == LEAK_ORDER ? (double)o->order : (double)(o->first_ns - o->arrival_ns);
    }
    double best = obs[0];
    uint32_t n_best = 0;
    for (uint32_t j = 0; j < V; j++)
        best = obs[j] < best ? obs[j] : best;
    for (uint32_t j = 0; j < V; j++)
        n_best += obs[j] == best;
    uint32_t pick = (uint32_t)gsl_rng_uniform_int(r, n_best);
    for (uint32_t j = 0; j < V; j++)
        if (obs[j] == best && pick-- == 0) {
            *guess = j;
            break;
        }
out:
    serve_result_free(&res);
    wl_free(&w);
    if (r)
        gsl_rng_free(r);
    free(ws.tok);
    free(ws.sens);
    free(ws.cand);
    free(ws.perm);
    return rc;
}

int leak_run(const leak_params *lp, const serve_params *sp, const serve_coster *c, leak_result *out,
             errbuf *e)
{
    memset(out, 0, sizeof *out);
    if (lp->trials == 0 || lp->candidates < 2)
        return err_set(e, MS_ERR_RANGE, "leak: need trials >= 1 and candidates >= 2");
    double *obs = malloc(lp->candidates * sizeof *obs);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!obs || !r) {
        free(obs);
        if (r)
            gsl_rng_free(r);
        return err_set(e, MS_ERR_NOMEM, "leak: out of memory");
    }
    gsl_rng_set(r, lp->seed);
    int rc = MS_OK;
    double gap = 0;
    for (uint32_t t = 0; t < lp->trials && !rc; t++) {
        uint32_t secret = (uint32_t)gsl_rng_uniform_int(r, lp->candidates), guess = 0;
        rc = leak_trial(lp, sp, c, t, secret, obs, &guess, e);
        if (rc)
            break;
        out->correct += guess == secret;
        double others = 0;
        for (uint32_t j = 0; j < lp->candidates; j++)
            others += j == secret ? 0 : obs[j];
        gap += others / (lp->candidates - 1) - obs[secret];
    }
    out->trials = lp->trials;
    out->chance = 1.0 / lp->candidates;
    out->success_rate = (double)out->correct / lp->trials;
    out->bits = leak_bits(out->success_rate, lp->candidates);
    out->p_value =
        out->correct ? gsl_cdf_binomial_Q(out->correct - 1, out->chance, lp->trials) : 1.0;
    out->ttft_gap_ms = lp->channel == LEAK_TTFT ? gap / lp->trials / 1e6 : 0;
    free(obs);
    gsl_rng_free(r);
    return rc;
}

/* cmd_validate_model.c — `mpcsim validate --model stories260K`: a secure session of the real
 * model on the backend (prefill + decode steps), each step's op program also costed and
 * simulated; `--accuracy N` (teacher-forced secure logits against the float reference, or
 * against the plaintext replay of `--policy`), `--generate N` (greedy generation timing). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "cmd_validate.h"
#include "models/llama.h"
#include "sim/secure/secinf.h"
#include "protocols/program/kern.h"
#include "sim/secure/valid.h"

/* The text to tokenize: --text FILE, else a built-in TinyStories-style sentence. */
static const char builtin_text[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, she saw a big red ball under a tree. She ran to the ball "
    "and picked it up. Her mom smiled and said, \"Lily, you can share the ball with your "
    "friends.\" Lily was happy and they played together all day.";

typedef struct vm_ctx {
    const vm_args *a;
    model_cfg m;
    llama *L;
    llama_tok *tok;
    int *ids;
    int n_ids;
} vm_ctx;

static int vm_open(vm_ctx *c, const vm_args *a, errbuf *e)
{
    memset(c, 0, sizeof *c);
    c->a = a;
    int rc = model_load(a->model, &c->m, e);
    char wp[1024], tp[1024];
    if (!rc && (!c->m.weights[0] || model_file_path(c->m.weights, wp, sizeof wp) ||
                !c->m.tokenizer[0] || model_file_path(c->m.tokenizer, tp, sizeof tp)))
        rc = err_set(e, MS_ERR_INPUT,
                     "model %s has no weights or tokenizer to run\n"
                     "---> HINT: the real backend runs stories260K",
                     c->m.name);
    if (!rc && c->m.family != FAM_LLAMA)
        rc = err_set(e, MS_ERR_INPUT, "model %s: the secure session runs llama-family checkpoints",
                     c->m.name);
    if (!rc)
        rc = llama_load(&c->m, wp, &c->L, e);
    if (!rc)
        rc = llama_tok_load(tp, c->m.vocab, &c->tok, e);
    char *text = NULL;
    if (!rc && a->text) {
        FILE *f = fopen(a->text, "rb");
        long n = -1;
        if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
            rc = err_set(e, MS_ERR_IO, "%s: cannot read the text", a->text);
        if (!rc && !(text = calloc((size_t)n + 1, 1)))
            rc = err_set(e, MS_ERR_NOMEM, "out of memory");
        if (!rc && fread(text, 1, (size_t)n, f) != (size_t)n)
            rc = err_set(e, MS_ERR_IO, "%s: cannot read the text", a->text);
        if (f)
            fclose(f);
    }
    const char *t = text ? text : builtin_text;
    size_t cap = strlen(t) + 8;
    if (!rc && !(c->ids = malloc(cap * sizeof *c->ids)))
        rc = err_set(e, MS_ERR_NOMEM, "out of memory");
    if (!rc)
        c->n_ids = llama_tok_encode(c->tok, t, c->ids, (int)cap);
    free(text);
    return rc;
}

static void vm_close(vm_ctx *c)
{
    llama_free(c->L);
    llama_tok_free(c->tok);
    free(c->ids);
}

static int need_tokens(const vm_ctx *c, uint32_t n, errbuf *e)
{
    if ((uint32_t)c->n_ids >= n)
        return MS_OK;
    return err_set(e, MS_ERR_INPUT,
                   "the text has %d tokens, %u needed\n---> HINT: give a longer "
                   "text with --text FILE (e.g. tests/data/tinystories_sample.txt)",
                   c->n_ids, n);
}

/* "1034", "903", "12.5", "0.41": a time in ms in at most five characters where it can. */
static void fmt_ms(char *out, size_t n, double ms)
{
    snprintf(out, n, ms >= 100 ? "%.0f" : ms >= 1 ? "%.3g" : "%.2f", ms);
}

/* A comment of the tables: "# " and the text formatted from fmt, wrapped at 80 columns. */
static void comment_wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void comment_wrap(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (const char *s = text; *s;) {
        size_t len = strlen(s);
        if (len > 78) { /* at the last space that fits */
            len = 78;
            while (len > 0 && s[len] != ' ')
                len--;
            if (!len)
                len = 78;
        }
        printf("# %.*s\n", (int)len, s);
        s += len;
        while (*s == ' ')
            s++;
    }
}

/* p when p equals m, else p/m. */
static void pm(char *out, size_t n, unsigned long long p, unsigned long long m)
{
    snprintf(out, n, p == m ? "%llu" : "%llu/%llu", p, m);
}

/* 80 columns: every party's bytes compared (the check), their sums shown; the bytes on the
 * wire under the row. */
static void print_row_short(const char *pn, const valid_row *r, int np, int plaintext)
{
    unsigned long long pb = 0, mb = 0, pw = 0, mw = 0;
    for (int i = 0; i < np && i < RDB_PARTIES; i++)
        pb += r->pred.bytes[i], mb += r->meas.bytes[i], pw += r->pred_wire[i],
            mw += r->meas_wire[i];
    const char *step = strchr(r->item, ':') ? strchr(r->item, ':') + 1 : r->item;
    char what[40], rounds[24], online[32], offline[32], tp[16], tm[16], t[40], wire[40];
    snprintf(what, sizeof what, "%.10s %u%s%.0u", step, r->n_tokens, r->kv_len ? "@" : "",
             r->kv_len);
    pm(rounds, sizeof rounds, (unsigned long long)r->pred.rounds,
       (unsigned long long)r->meas.rounds);
    pm(online, sizeof online, pb, mb);
    pm(offline, sizeof offline, (unsigned long long)r->pred_offline,
       (unsigned long long)r->meas_offline);
    fmt_ms(tp, sizeof tp, (double)r->pred_ns * 1e-6);
    fmt_ms(tm, sizeof tm, (double)r->meas_ns * 1e-6);
    snprintf(t, sizeof t, "%s/%s", tp, tm);
    printf("%-6s %-14s %6s %10s %10s %11s %+6.1f%% %s\n", pn, what, rounds, online, offline, t,
           valid_err_pct(r->pred_ns, r->meas_ns), r->ops_mismatched ? "MISMATCH" : "ok");
    pm(wire, sizeof wire, pw, mw);
    printf("%-21s %6s %10s %s (payload, frames%s)\n", "", "wire", wire,
           r->wire_mismatched ? "MISMATCH" : "ok", plaintext ? "" : ", TLS records");
}

static void print_row(const char *pn, const valid_row *r, int np)
{
    printf("%-7s %-20s %5u %5u | %5llu/%-5llu | %9llu/%-9llu | %9llu/%-9llu", pn, r->item,
           r->n_tokens, r->kv_len, (unsigned long long)r->pred.rounds,
           (unsigned long long)r->meas.rounds, (unsigned long long)r->pred.bytes[0],
           (unsigned long long)r->meas.bytes[0], (unsigned long long)r->pred.bytes[1],
           (unsigned long long)r->meas.bytes[1]);
    if (np == 3)
        printf(" | %9llu/%-9llu", (unsigned long long)r->pred.bytes[2],
               (unsigned long long)r->meas.bytes[2]);
    else
        printf(" | %9llu/%-9llu", (unsigned long long)r->pred_offline,
               (unsigned long long)r->meas_offline);
    printf(" | %8.1f/%-8.1f %+6.1f%% %s\n", (double)r->pred_ns * 1e-6, (double)r->meas_ns * 1e-6,
           valid_err_pct(r->pred_ns, r->meas_ns), r->ops_mismatched ? "MISMATCH" : "ok");
}

/* The backend's stream framing on w: every message's 32-byte frame header and, unless
 * plaintext, TLS 1.3 records (net.h; protocols/backend/mpc_tls.h). */
static void vm_stream_wire(net_wire *w, int plaintext)
{
    w->msg_bytes = MPC_FRAME_HDR;
    w->tls_record = plaintext ? 0 : NET_WIRE_TLS13_RECORD;
    w->tls_overhead = plaintext ? 0 : NET_WIRE_TLS13_OVERHEAD;
}

/* The row's bytes on the wire: payload + frame headers (+ TLS records' framing), by party. */
static void print_wire(const valid_row *r, int np, int plaintext)
{
    printf("#       on the wire (payload + frame headers%s), pred/meas:",
           plaintext ? "" : " + TLS records");
    for (int i = 0; i < np && i < RDB_PARTIES; i++)
        printf(" P%d %llu/%llu", i, (unsigned long long)r->pred_wire[i],
               (unsigned long long)r->meas_wire[i]);
    printf(" %s\n", r->wire_mismatched ? "MISMATCH" : "ok");
}

/* One protocol: a session of prefill + decode steps; rows for the prefill and the last decode
 * step; every step's ops compared. Returns 1 when some bytes/rounds differ. */
static int vm_programs(vm_ctx *c, const proto_cfg *cfg, rdb *db, int *bad, errbuf *e)
{
    const vm_args *a = c->a;
    const proto *pr = proto_find(cfg->name);
    int rc = need_tokens(c, a->prompt + a->decode, e);
    netshape ns = {0};
    if (!rc && a->shape)
        rc = netshape_up(&ns, 3, a->bandwidth_bps, e);
    uint64_t base = 0;
    if (!rc)
        rc = valid_round_ns(cfg, a->latency_ns, a->shape ? &ns : NULL, a->plaintext, &base, e);
    secinf_opts o = {.model = &c->m,
                     .weights = c->L,
                     .cfg = *cfg,
                     .tokens = c->ids,
                     .n_tokens = a->prompt + a->decode,
                     .prefill = a->prompt,
                     .latency_ns = a->latency_ns,
                     .plaintext = a->plaintext};
    secinf_result r = {0};
    if (!rc && !a->shape)
        rc = secinf_run(&o, &r, e);
    else if (!rc) {
        mpc_launch l = {.cfg = *cfg,
                        .latency_ns = a->latency_ns,
                        .timeout_ms = 60000,
                        .deadline_ms = 600000,
                        .plaintext = a->plaintext};
        mpc_node_result nr[MPC_NODES_MAX];
        int nodes = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (!(rc = secinf_prepare(&o, &r, e)))
            rc = netshape_launch(&ns, &l, secinf_node, &o, nr, &nodes, e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (!rc)
            rc = secinf_collect(&r, nr, nodes, e);
        if (nodes)
            mpc_node_results_free(nr, nodes);
    }
    netshape_down(&ns);
    if (rc) {
        secinf_result_free(&r);
        return rc;
    }
    /* the simulated links: the injected latency plus the probe's round overhead; shaped, each
     * one a token bucket as deep as its tbf qdisc's burst */
    net_cfg net;
    net_uniform(&net, pr->n_parties, a->latency_ns + base, a->bandwidth_bps);
    if (a->shape) { /* tbf counts frames: the segments' headers and the ACKs on each link */
        net_set_burst(&net, net_tbf_burst_bytes(a->bandwidth_bps));
        net.wire = NET_WIRE_TCP;
        net.wire.mtu = NETSHAPE_MTU;
    }
    vm_stream_wire(&net.wire, a->plaintext);
    for (uint32_t s = 0; !rc && s < r.n_steps; s++) {
        valid_row row;
        rc = valid_step(&o, &r, s, &net, &a->mach, &row, e);
        if (rc)
            break;
        if (row.wire_mismatched) {
            *bad = 1;
            fprintf(stderr,
                    "mpcsim validate: %s %s step %u: the bytes on the wire of %u of %u ops differ "
                    "from the "
                    "framing model\n",
                    cfg->name, row.item, s, row.wire_mismatched, row.ops);
        }
        if (row.ops_mismatched) {
            *bad = 1;
            fprintf(stderr, "mpcsim validate: %s %s step %u: %u of %u ops differ; first: %s\n",
                    cfg->name, row.item, s, row.ops_mismatched, row.ops, row.first_mismatch);
        }
        if (s != 0 && s + 1 != r.n_steps)
            continue;
        if (!a->wide)
            print_row_short(cfg->name, &row, pr->n_parties, a->plaintext);
        else {
            print_row(cfg->name, &row, pr->n_parties);
            print_wire(&row, pr->n_parties, a->plaintext);
        }
        if (db)
            rc = valid_store(db, a->session, cfg->name, &row, a->latency_ns, a->bandwidth_bps,
                             a->shape ? "tbf" : "none", e);
    }
    char shaped[200] = "";
    if (a->shape)
        snprintf(shaped, sizeof shaped,
                 "; links shaped with tbf, simulated as token buckets of %llu bytes "
                 "carrying TCP frames (mtu %u)%s",
                 (unsigned long long)net.link[0][1].burst_bytes, net.wire.mtu,
                 a->plaintext ? "" : " of TLS 1.3 records");
    comment_wrap("%s: session %.2f s; round overhead %.0f us (probe, added to the links' "
                 "latency)%s",
                 cfg->name, r.seconds, (double)base * 1e-3, shaped);
    secinf_result_free(&r);
    return rc;
}

/* Whether the replay's kept sets hold every cached entry at every recorded step (an eviction
 * policy that selected nothing in this run; an FFN sparsity policy keeps every entry anyway). */
static int keeps_every_entry(const secpol_keep *k)
{
    if (!k || !k->keep)
        return 0;
    for (uint32_t pos = k->from; pos < k->max_len; pos++)
        for (uint32_t l = 0; l < k->n_layers; l++)
            for (uint32_t g = 0; g < k->n_kv_heads; g++) {
                const uint8_t *m = secpol_keep_mask(k, pos, l, g);
                for (uint32_t j = 0; m && j < pos; j++)
                    if (!m[j])
                        return 0;
            }
    return 1;
}

/* How the policy ran inside MPC, and for a selection on shares its agreement with the
 * plaintext replay (the one-hots opened after each step: validation only). */
static int vm_policy_note(const vm_args *a, const secinf_opts *o, const secinf_result *r,
                          const secpol_keep *plain, secinf_spol sp, int is_pub, const float *ref,
                          errbuf *e)
{
    if (is_pub) {
        printf("#       %s's kept set is a public function of positions: the secure run re-lays "
               "the secret cache out\n"
               "#       locally (no selection to compute on shares)\n",
               a->policy);
        return 0;
    }
    const policy_ops *kp = policy_find(a->policy);
    if (!sp.ops && !(kp && kp->ffn_active) && keeps_every_entry(plain)) {
        printf("#       %s keeps every cached entry at every step of this run: nothing was "
               "selected, so there is\n"
               "#       no selection to run on shares (a longer run, --accuracy, or a smaller "
               "budget makes it select)\n",
               a->policy);
        return 0;
    }
    if (!sp.ops) {
        const policy_ops *pol = policy_find(a->policy);
        printf("#       NOTE: %s has no selection on shares%s: the secure run applies the kept "
               "sets of its plaintext\n"
               "#       replay (keep masks), which a deployment could not compute\n",
               a->policy, pol && pol->secure ? pol->secure->which : "");
        if (sp.why[0])
            printf("#       (%s)\n", sp.why);
        return 0;
    }
    secpol_run pub = secinf_public(o);
    secpol_opened opened = secinf_opened(r);
    fflush(stdout);
    if (!sp.ops->audit_note(sp.cfg, &pub, &opened, plain, ref, a->policy, stdout, e))
        return 0;
    printf("#       selection audit failed: %s\n", e->msg);
    return 1;
}

/* Teacher-forced accuracy: secure logits at every position against the float reference (or
 * the plaintext replay of the policy: H2O selects on shares, StreamingLLM's kept set is public,
 * any other policy applies the replay's keep masks and says so). */
static int vm_accuracy(vm_ctx *c, const proto_cfg *cfg, int *bad, errbuf *e)
{
    const vm_args *a = c->a;
    uint32_t N = a->accuracy, P = a->policy ? a->prompt : 1, V = c->m.vocab;
    int rc = need_tokens(c, N, e);
    if (rc)
        return rc;
    if (P > N)
        return err_set(e, MS_ERR_INPUT, "--prompt %u is longer than --accuracy %u", P, N);
    float *ref = malloc((size_t)N * V * sizeof *ref), *full = malloc((size_t)N * V * sizeof *full);
    secpol_keep k = {0}, pk = {0};
    secinf_spol sp = {0};
    int is_pub = 0;
    if (!ref || !full)
        rc = err_set(e, MS_ERR_NOMEM, "out of memory");
    llama_reset(c->L);
    for (uint32_t p = 0; !rc && p < N; p++)
        rc = llama_forward(c->L, c->ids[p], p, NULL, full + (size_t)p * V);
    if (!rc && a->policy)
        rc = secinf_policy_replay(&c->m, c->L, a->policy, a->policy_params, a->n_policy_params,
                                  c->ids, N, P, &k, ref, e);
    else if (!rc)
        memcpy(ref, full, (size_t)N * V * sizeof *ref);
    if (!rc && a->policy)
        rc = secinf_spol_of(&c->m, a->policy, a->policy_params, a->n_policy_params, P, N, &sp,
                            &is_pub, e);
    if (!rc && a->policy && is_pub)
        rc = secinf_public_keep(&c->m, a->policy, a->policy_params, a->n_policy_params, N, P, &pk,
                                e);
    secinf_opts o = {.model = &c->m,
                     .weights = c->L,
                     .cfg = *cfg,
                     .tokens = c->ids,
                     .n_tokens = N,
                     .prefill = P,
                     .keep = !a->policy || sp.ops ? NULL
                             : is_pub             ? &pk
                                                  : &k,
                     .spol = sp,
                     .audit = sp.ops != NULL,
                     .plaintext = a->plaintext};
    secinf_result r = {0};
    if (!rc)
        rc = secinf_run(&o, &r, e);
    if (!rc) {
        llama_acc acc, pol;
        llama_compare(r.logits, ref + (size_t)(P - 1) * V, r.n_steps, V, &acc);
        kern_conf kv; /* the approximations that ran (a compat profile sets its own) */
        const char *apx =
            kern_configure(cfg, &kv) ? cfg->approx : kern_variant_name("approx", kv.approx);
        printf("%-7s %s%s%s: %u positions teacher-forced: top-1 agreement %u/%u (%.2f%%), logit "
               "error max %.4f "
               "mean %.5f (%s, approx %s, frac_bits %d); %.1f s\n",
               cfg->name, c->m.name, a->policy ? " under " : "", a->policy ? a->policy : "", acc.n,
               acc.top1_agree, acc.n, 100.0 * acc.top1_agree / acc.n, acc.max_abs, acc.mean_abs,
               a->policy ? "vs the plaintext replay of the policy" : "vs the float reference", apx,
               cfg->frac_bits, r.seconds);
        /* every step's bytes and rounds against the cost engine on the same program */
        net_cfg net;
        net_uniform(&net, (int)r.n_parties, 0, a->bandwidth_bps);
        uint32_t bad_steps = 0;
        uint64_t bytes[2] = {0}, rounds[2] = {0}, ns[2] = {0}; /* the prompt, the decode steps */
        for (uint32_t s = 0; !rc && s < r.n_steps; s++) {
            valid_row row;
            rc = valid_step(&o, &r, s, &net, &a->mach, &row, e);
            bad_steps += !rc && row.ops_mismatched;
            for (int i = 0; !rc && i < RDB_PARTIES; i++)
                bytes[s > 0] += row.meas.bytes[i];
            rounds[s > 0] += rc ? 0 : row.meas.rounds;
            ns[s > 0] += rc ? 0 : row.meas_ns;
        }
        *bad |= bad_steps != 0;
        printf("#       bytes and rounds of every op of the %u steps equal the prediction: %s\n",
               r.n_steps, bad_steps ? "NO" : "yes");
        if (!rc && a->policy)
            printf("#       measured online: prompt %llu bytes, %llu rounds, %.3f s; %u decode "
                   "steps %llu bytes, %llu rounds, %.3f s\n",
                   (unsigned long long)bytes[0], (unsigned long long)rounds[0],
                   (double)ns[0] * 1e-9, r.n_steps - 1, (unsigned long long)bytes[1],
                   (unsigned long long)rounds[1], (double)ns[1] * 1e-9);
        if (acc.top1_agree < acc.n)
            printf("#       disagreements are %s: the reference's margin there is at most %.4f "
                   "(logit error bound %.4f)\n",
                   acc.miss_gap < 2 * acc.max_abs ? "near ties" : "NOT near ties", acc.miss_gap,
                   acc.max_abs);
        if (a->policy)
            *bad |= vm_policy_note(a, &o, &r, &k, sp, is_pub, ref + (size_t)(P - 1) * V, e);
        if (a->policy) { /* how far the policy moved the model: the match is not trivial */
            double *pd = malloc((size_t)r.n_steps * V * sizeof *pd);
            for (size_t i = 0; pd && i < (size_t)r.n_steps * V; i++)
                pd[i] = ref[(size_t)(P - 1) * V + i];
            if (pd) {
                llama_compare(pd, full + (size_t)(P - 1) * V, r.n_steps, V, &pol);
                printf("#       the policy's own effect (plaintext, vs the full cache): top-1 "
                       "%u/%u, logit "
                       "difference max %.4f mean %.5f\n",
                       pol.top1_agree, pol.n, pol.max_abs, pol.mean_abs);
            }
            free(pd);
        }
    }
    secinf_result_free(&r);
    secpol_keep_free(&k);
    secpol_keep_free(&pk);
    secinf_spol_free(&sp);
    free(ref);
    free(full);
    return rc;
}

/* Greedy generation of N tokens after the prompt: wall time and the tokens against the float
 * model's greedy continuation. */
static int vm_generate(vm_ctx *c, const proto_cfg *cfg, errbuf *e)
{
    const vm_args *a = c->a;
    uint32_t P = a->prompt, N = a->generate, V = c->m.vocab;
    int rc = need_tokens(c, P, e);
    if (rc)
        return rc;
    secinf_opts o = {.model = &c->m,
                     .weights = c->L,
                     .cfg = *cfg,
                     .tokens = c->ids,
                     .n_tokens = P,
                     .prefill = P,
                     .n_gen = N - 1,
                     .latency_ns = a->latency_ns};
    secinf_result r;
    if ((rc = secinf_run(&o, &r, e)))
        return rc;
    /* the float model's greedy continuation */
    float *lg = malloc(V * sizeof *lg);
    int tok = 0, same = 0;
    llama_reset(c->L);
    for (uint32_t p = 0; lg && !rc && p < P + N - 1; p++) {
        int in = p < P ? c->ids[p] : tok;
        rc = llama_forward(c->L, in, p, NULL, lg);
        if (p + 1 >= P) {
            tok = 0;
            for (uint32_t i = 1; i < V; i++)
                tok = lg[i] > lg[tok] ? (int)i : tok;
            same += tok == r.next[p + 1 - P];
        }
    }
    free(lg);
    uint64_t pre = 0, dec = 0;
    for (uint32_t s = 0; s < r.n_steps; s++) {
        uint64_t ns = 0;
        for (uint32_t i = 0; i < r.n_parties; i++)
            ns = r.st[(size_t)s * r.n_nodes + i].ns > ns ? r.st[(size_t)s * r.n_nodes + i].ns : ns;
        *(s ? &dec : &pre) += ns;
    }
    printf("%-7s %s: prompt %u tokens, %u generated: prefill %.3f s, decode %.3f s (%.1f "
           "ms/token), session %.2f s; "
           "greedy tokens equal to the float model's: %d/%u\n",
           cfg->name, c->m.name, P, N, (double)pre * 1e-9, (double)dec * 1e-9,
           (double)dec * 1e-6 / (N > 1 ? N - 1 : 1), r.seconds, same, N);
    printf("#       text:");
    for (uint32_t s = 0; s < r.n_steps; s++)
        printf("%s", llama_tok_piece(c->tok, s ? r.next[s - 1] : c->ids[P - 1], r.next[s]));
    printf("\n");
    secinf_result_free(&r);
    return rc;
}

int validate_model(const vm_args *a, const proto_cfg *cfgs, int n_cfgs, rdb *db, int *bad,
                   errbuf *e)
{
    vm_ctx c;
    int rc = vm_open(&c, a, e);
    if (!rc && !a->accuracy && !a->generate && !a->wide)
        printf("%-6s %-14s %6s %10s %10s %11s %7s %s\n", "proto", a->model, "rounds", "online",
               "offline", "time ms p/m", "error", "check");
    else if (!rc && !a->accuracy && !a->generate) {
        printf("%-7s %-20s %5s %5s | %-11s | %-19s | %-19s | %-19s | %s\n", "proto", "program",
               "new", "kv", "rounds p/m", "bytes P0 p/m", "bytes P1 p/m", "P2 (aby3) / offline",
               "time ms p/m, error");
    }
    for (int i = 0; !rc && i < n_cfgs; i++) {
        if (a->accuracy)
            rc = vm_accuracy(&c, &cfgs[i], bad, e);
        else if (a->generate)
            rc = vm_generate(&c, &cfgs[i], e);
        else
            rc = vm_programs(&c, &cfgs[i], db, bad, e);
    }
    if (!rc && !a->accuracy && !a->generate && !a->wide)
        comment_wrap("%s: the prefill of N tokens, and the last decode step (N@KV: N new "
                     "tokens over KV cached). Predicted (cost engine + simulator) against "
                     "measured (backend, %s, %.3g ms one-way latency injected by the transport): "
                     "one figure when they agree, p/m when not. online: bytes every party sends "
                     "(each compared), summed; offline: bytes from the dealer (aby3: none). "
                     "check: the bytes and rounds of every op of every step, exactly (a "
                     "difference fails the command); error: the time's, a note. --wide: each "
                     "party's bytes.",
                     a->model,
                     a->shape ? "a network namespace per node, shaped with tbf"
                              : "parties forked on 127.0.0.1",
                     (double)a->latency_ns * 1e-6);
    else if (!rc && !a->accuracy && !a->generate)
        printf("# p = predicted (cost engine + simulator), m = measured (backend, %s, %.3g ms\n"
               "# one-way latency injected by the transport). Bytes: online payload sent by the "
               "party. Time: the\n"
               "# step's ops, until the last party is done.\n",
               a->shape ? "one network namespace per node, egress shaped with tbf"
                        : "parties forked on 127.0.0.1",
               (double)a->latency_ns * 1e-6);
    vm_close(&c);
    return rc;
}

/* bench_kern.c — how long costing a transformer step takes (llama-2-7b shapes, one decode
 * token at a given context), per protocol, and its totals. Prints figures only. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "protocols/program/proto.h"

static uint32_t T(op_program *p, const char *nm, int role, uint32_t b, uint32_t r, uint32_t c)
{
    return op_tensor_add(p, nm, role, DOM_ARITH, b, r, c);
}

static void E(op_program *p, int kind, int cat, uint32_t b, uint32_t m, uint32_t k, uint32_t n,
              uint32_t i0, uint32_t i1, uint32_t i2, uint32_t out, uint32_t flags, int iarg)
{
    op o = {.kind = (uint16_t)kind,
            .cat = (uint8_t)cat,
            .layer = 0,
            .group = -1,
            .batch = b,
            .m = m,
            .k = k,
            .n = n,
            .in = {i0, i1, i2},
            .out = out,
            .flags = flags,
            .iarg = iarg};
    op_emit(p, &o);
}

/* A llama-style decode step: d model dim, H heads of hd, F ffn, L layers, ctx keys. */
static void build_llama(op_program *p, int L, uint32_t d, uint32_t H, uint32_t hd, uint32_t F,
                        uint32_t V, uint32_t ctx)
{
    uint32_t x = T(p, "x", OPT_INPUT, 1, 1, d);
    E(p, OP_INPUT, OPC_EMBED, 1, 1, 0, d, OP_NONE, OP_NONE, OP_NONE, x, 0, 0);
    for (int l = 0; l < L; l++) {
        uint32_t g = T(p, "g", OPT_WEIGHT, 1, 1, d), h = T(p, "h", OPT_TEMP, 1, 1, d);
        E(p, OP_RMSNORM, OPC_NORM, 1, 1, 0, d, x, g, OP_NONE, h, 0, 0);
        uint32_t w = T(p, "wqkv", OPT_WEIGHT, 1, d, d), q = T(p, "q", OPT_TEMP, H, 1, hd);
        for (int i = 0; i < 3; i++)
            E(p, OP_MATMUL, OPC_ATTENTION, 1, 1, d, d, h, w, OP_NONE, q, OPF_FIXED_B, 0);
        E(p, OP_ROPE, OPC_ATTENTION, H, 1, 0, hd, q, OP_NONE, OP_NONE, q, 0, (int)ctx - 1);
        E(p, OP_ROPE, OPC_ATTENTION, H, 1, 0, hd, q, OP_NONE, OP_NONE, q, 0, (int)ctx - 1);
        uint32_t K = T(p, "K", OPT_CACHE, H, ctx, hd), s = T(p, "s", OPT_TEMP, H, 1, ctx);
        E(p, OP_MATMUL, OPC_ATTENTION, H, 1, hd, ctx, q, K, OP_NONE, s, OPF_TRANS_B, 0);
        E(p, OP_SOFTMAX, OPC_SOFTMAX, H, 1, 0, ctx, s, OP_NONE, OP_NONE, s, 0, -1);
        uint32_t a = T(p, "a", OPT_TEMP, H, 1, hd);
        E(p, OP_MATMUL, OPC_ATTENTION, H, 1, ctx, hd, s, K, OP_NONE, a, 0, 0);
        E(p, OP_MATMUL, OPC_ATTENTION, 1, 1, d, d, a, w, OP_NONE, h, OPF_FIXED_B, 0);
        E(p, OP_ADD, OPC_ATTENTION, 1, 1, 0, d, x, h, OP_NONE, x, 0, 0);
        E(p, OP_RMSNORM, OPC_NORM, 1, 1, 0, d, x, g, OP_NONE, h, 0, 0);
        uint32_t wu = T(p, "wu", OPT_WEIGHT, 1, d, F), u = T(p, "u", OPT_TEMP, 1, 1, F);
        uint32_t v = T(p, "v", OPT_TEMP, 1, 1, F);
        E(p, OP_MATMUL, OPC_FFN, 1, 1, d, F, h, wu, OP_NONE, u, OPF_FIXED_B, 0);
        E(p, OP_MATMUL, OPC_FFN, 1, 1, d, F, h, wu, OP_NONE, v, OPF_FIXED_B, 0);
        E(p, OP_SILU, OPC_ACTIVATION, 1, 1, 0, F, u, OP_NONE, OP_NONE, u, 0, 0);
        E(p, OP_MUL, OPC_FFN, 1, 1, 0, F, u, v, OP_NONE, u, 0, 0);
        uint32_t wd = T(p, "wd", OPT_WEIGHT, 1, F, d);
        E(p, OP_MATMUL, OPC_FFN, 1, 1, F, d, u, wd, OP_NONE, h, OPF_FIXED_B, 0);
        E(p, OP_ADD, OPC_FFN, 1, 1, 0, d, x, h, OP_NONE, x, 0, 0);
    }
    uint32_t wl = T(p, "lm", OPT_WEIGHT, 1, d, V), lo = T(p, "logits", OPT_TEMP, 1, 1, V);
    E(p, OP_MATMUL, OPC_LMHEAD, 1, 1, d, V, x, wl, OP_NONE, lo, OPF_FIXED_B, 0);
    uint32_t am = T(p, "am", OPT_TEMP, 1, 1, V);
    E(p, OP_ARGMAX, OPC_LMHEAD, 1, 1, 0, V, lo, OP_NONE, OP_NONE, am, 0, 0);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    op_program p;
    op_program_init(&p);
    build_llama(&p, 32, 4096, 32, 128, 11008, 32000, 32768);
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "aby3" : "semi2k";
        const proto *pr = proto_find(nm);
        proto_cfg cfg;
        errbuf e;
        cost_log lg;
        proto_cfg_default(nm, &cfg, &e);
        cost_log_init(&lg, pr->n_parties);
        proto_cost_program(pr, &cfg, &p, &lg, &e); /* warm: log capacity */
        int reps = 20;
        double t0 = now();
        for (int r = 0; r < reps; r++)
            if (proto_cost_program(pr, &cfg, &p, &lg, &e)) {
                fprintf(stderr, "%s\n", e.msg);
                return 1;
            }
        double dt = (now() - t0) / reps;
        cost_totals t = {0};
        for (size_t k = 0; k < lg.n; k++)
            cost_totals_add_round(&t, &lg.r[k], lg.n_parties);
        printf("%-7s llama-2-7b decode @32K: %zu ops, %zu log records, %llu rounds, "
               "P0 sends %.3f GB, P1 offline %.3f GB; costed in %.3f ms\n",
               nm, p.n_ops, lg.n, (unsigned long long)t.rounds, t.bytes_sent[0] / 1e9,
               t.offline_bytes[1] / 1e9, dt * 1e3);
        cost_log_free(&lg);
    }
    op_program_free(&p);
    return 0;
}

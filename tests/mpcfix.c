/* mpcfix.c — see mpcfix.h. */
#include "mpcfix.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "protocols/backend/mpc_net.h"

proto_cfg mpcfix_cfg(const char *name)
{
    proto_cfg c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.ring_bits = 64;
    c.frac_bits = 18;
    c.exp_iters = 8;
    c.recip_iters = 3;
    c.rsqrt_iters = 3;
    c.softmax_clip = -14;
    c.beaver_cache = 1;
    snprintf(c.approx, sizeof c.approx, "puma");
    return c;
}

void mpcfix_assert_keys(const char *dir, int n)
{
    th_assert_mode(dir, 0700);
    char p[512];
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/node%d.key", dir, i);
        th_assert_mode(p, 0600);
        ck_assert_msg(strstr(th_text(p), "-----BEGIN PRIVATE KEY-----") != NULL, "%s", p);
        snprintf(p, sizeof p, "%s/node%d.pem", dir, i);
        th_assert_mode(p, 0644);
        ck_assert_msg(strstr(th_text(p), "-----BEGIN CERTIFICATE-----") != NULL, "%s", p);
    }
}

void mpcfix_frame(uint8_t *h, uint16_t ver, uint16_t type, uint32_t op_id, uint32_t seq,
                  uint64_t len)
{
    uint32_t magic = MPC_FRAME_MAGIC;
    memcpy(h, &magic, 4);
    memcpy(h + 4, &ver, 2);
    memcpy(h + 6, &type, 2);
    memcpy(h + 8, &op_id, 4);
    memcpy(h + 12, &seq, 4);
    memcpy(h + 16, &len, 8);
}

/* SplitMix64: deterministic test data (not secret shares; those come from mpc_prg). */
uint64_t mpcfix_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Values of |x| < 2^bound (signed) or full 64-bit words (bound 64). */
void mpcfix_fill(uint64_t *v, size_t n, uint64_t seed, int bound)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mpcfix_mix(&s);
        v[i] = bound >= 64 ? r : (uint64_t)((int64_t)(r >> (64 - bound - 1)) - (1ll << bound));
    }
}

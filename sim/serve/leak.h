/* leak.h — a timing side-channel attacker against the serving simulation's shared KV cache,
 * after PROMPTPEEK (NDSS 2025) and InputSnatch (arXiv 2411.18191): policies.md §2.3.
 *
 * A victim sends a prompt made of a public template (insensitive) followed by a secret token
 * (sensitive; one of `candidates` known tokens) and private text. An attacker tenant then
 * probes the cache with `template + candidate + one filler token` for every candidate,
 * labelling its own probes insensitive (the worst case for masking), and guesses:
 *   ttft   the candidate whose probe had the lowest time to first token (probes sent one at
 *          a time, probe_gap apart, in a random order);
 *   order  the candidate whose probe got its first token first, when all probes are queued
 *          together behind a blocker request (the scheduling-order channel, which needs the
 *          LPM scheduler to exist).
 * Ties are broken uniformly at random. Background users add queueing noise. Each trial plants
 * a fresh uniformly drawn secret and runs a fresh simulation. The secret sits at the last
 * position of a cache block when template_len + 1 is a multiple of the block size, the
 * alignment a block-granular attacker arranges. */
#ifndef MPCSIM_LEAK_H
#define MPCSIM_LEAK_H

#include <stdint.h>

#include "protocols/base/err.h"
#include "serve.h"

typedef enum { LEAK_TTFT, LEAK_ORDER } leak_channel;

typedef struct leak_params {
    uint64_t seed;
    uint32_t trials;
    uint32_t candidates;     /* V, the secret is one of them (chance = 1/V) */
    uint32_t template_len;   /* public tokens before the secret (31: block 16 aligned) */
    int channel;             /* leak_channel */
    uint32_t background;     /* other users' requests per trial */
    double background_rate;  /* their arrivals per second */
    uint64_t probe_start_ns; /* first probe, after the victim was served */
    uint64_t probe_gap_ns;   /* between probes (ttft channel) */
    uint32_t vocab;
} leak_params;

typedef struct leak_result {
    uint32_t trials, correct;
    double success_rate, chance;
    double bits;        /* information per secret: log2 V + p log2 p +
                         * (1−p) log2((1−p)/(V−1)) (V-ary symmetric channel), 0 at or
                         * below chance */
    double p_value;     /* P(at least this many correct | guessing at chance), binomial */
    double ttft_gap_ms; /* mean over trials of (mean other-probe TTFT − secret-probe TTFT) */
} leak_result;

void leak_params_default(leak_params *p);
const char *leak_channel_name(int c);
int leak_channel_from_name(const char *s);

/* One trial with a given secret index: fills obs[V] with what the attacker observes for each
 * candidate (TTFT in ns, or first-token rank) and *guess with its guess. */
int leak_trial(const leak_params *lp, const serve_params *sp, const serve_coster *c, uint32_t trial,
               uint32_t secret, double *obs, uint32_t *guess, errbuf *e);
int leak_run(const leak_params *lp, const serve_params *sp, const serve_coster *c, leak_result *out,
             errbuf *e);
double leak_bits(double p, uint32_t V);

#endif

/* workload.h — multi-user request workloads for the serving simulation.
 *
 * A request is a prompt (token ids) with a per-token sensitivity mask, a tenant, a user, an
 * arrival time and a decode length. Prompts are built from segments, in this order:
 *
 *   [tenant system prompt] [user context] [shared documents] [user turn]
 *    insensitive           sensitive       insensitive        sensitive (all, or a PII share)
 *
 * The generator draws every segment's tokens and the Poisson arrivals from one seeded GSL RNG
 * (mt19937), so a seed fixes the workload. A workload can also be replayed from a text file:
 *
 *   mpcsim-serve-workload 1
 *   # req <arrival_ns> <tenant> <user> <decode_len> : <token> <token> …
 *   req 0 0 3 16 : 101 102 !7001 !7002 103
 *
 * One request per line, '#' starts a comment; a token written `!id` is sensitive, `id` is not.
 * Arrival times must not decrease. Requests are numbered in file order. */
#ifndef MPCSIM_WORKLOAD_H
#define MPCSIM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/base/err.h"

#define WL_FORMAT "mpcsim-serve-workload"
#define WL_FORMAT_VERSION 1

typedef struct wl_request {
    uint64_t arrival_ns;
    uint32_t tenant, user; /* user ids are global (unique across tenants) */
    uint32_t decode_len;   /* output tokens, >= 1 (the first comes out of the prefill) */
    uint32_t n_tokens;     /* prompt length */
    size_t off;            /* into workload.tok / workload.sens */
} wl_request;

typedef struct workload {
    wl_request *req;
    size_t n, cap;
    uint32_t *tok; /* (total prompt tokens) */
    uint8_t *sens; /* (total prompt tokens), 1 = sensitive */
    size_t n_tok, cap_tok;
} workload;

/* Generator parameters (defaults: wl_params_default). */
typedef struct wl_params {
    uint64_t seed;
    uint32_t n_requests;
    double rate; /* mean arrivals per second (Poisson process) */
    uint32_t n_tenants;
    uint32_t users_per_tenant;
    uint32_t sys_len;         /* tokens of each tenant's system prompt */
    uint32_t user_ctx_len;    /* per-user persistent private context (profile, history) */
    uint32_t n_docs, doc_len; /* shared document pool */
    uint32_t docs_per_req;
    double doc_zipf;             /* document popularity exponent s (weight 1/k^s); 0 = uniform */
    uint32_t turn_min, turn_max; /* private user turn length, uniform */
    uint32_t decode_min, decode_max; /* output length, uniform */
    double pii_fraction;             /* share of user-turn tokens that are sensitive (1 = all) */
    uint32_t pii_run;                /* sensitive tokens come in runs of this length */
    uint32_t vocab;
} wl_params;

void wl_params_default(wl_params *p);
int wl_params_check(const wl_params *p, errbuf *e);

void wl_init(workload *w);
void wl_free(workload *w);
/* Appends a request; tok/sens (n tokens) are copied. sens may be NULL (all insensitive). */
int wl_add(workload *w, uint64_t arrival_ns, uint32_t tenant, uint32_t user, uint32_t decode_len,
           const uint32_t *tok, const uint8_t *sens, uint32_t n, errbuf *e);
static inline const uint32_t *wl_tok(const workload *w, size_t i) { return w->tok + w->req[i].off; }
static inline const uint8_t *wl_sens(const workload *w, size_t i)
{
    return w->sens + w->req[i].off;
}

int wl_generate(const wl_params *p, workload *w, errbuf *e);
/* Replay files: path is used in "path:line:col: error: …" messages. */
int wl_read(workload *w, FILE *f, const char *path, errbuf *e);
int wl_load(workload *w, const char *path, errbuf *e);
int wl_write(const workload *w, FILE *f);

#endif

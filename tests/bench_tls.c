/* bench_tls.c — what the backend's TLS 1.3 channels cost: one mutually authenticated handshake
 * (Ed25519 certificates, the accepting side's confirmation byte included) over a socketpair,
 * and the time to make a 3-node key folder; medians of repeated runs. Prints figures only. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "protocols/backend/mpc_tls.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct side {
    mpc_tls *t;
    int fd, server, rc;
    uint64_t sent, recv;
} side;

static void *run(void *arg)
{
    side *s = arg;
    mpc_tls_conn *c = NULL;
    errbuf why;
    s->rc = mpc_tls_handshake(s->t, s->fd, s->server, s->server ? 2 : 0, "peer",
                              now_ns() + 5000000000ull, &c, &why);
    if (s->rc)
        fprintf(stderr, "bench_tls: %s\n", why.msg);
    mpc_tls_wire(c, &s->sent, &s->recv);
    mpc_tls_close(c);
    return NULL;
}

#define RUNS 41

int main(void)
{
    char dir[] = "/tmp/bench_tls_XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    errbuf e;
    uint64_t mk[RUNS], hs[RUNS], sent = 0, recv = 0;
    char kd[64];
    for (int r = 0; r < RUNS; r++) { /* key folders */
        snprintf(kd, sizeof kd, "%s/k%d", dir, r);
        uint64_t t0 = now_ns();
        if (mpc_tls_make_keys(kd, 3, &e)) {
            fprintf(stderr, "bench_tls: %s\n", e.msg);
            return 1;
        }
        mk[r] = now_ns() - t0;
    }
    snprintf(kd, sizeof kd, "%s/k0", dir);
    side c = {.server = 0}, s = {.server = 1};
    if (mpc_tls_load(kd, 2, &c.t, &e) || mpc_tls_load(kd, 0, &s.t, &e)) {
        fprintf(stderr, "bench_tls: %s\n", e.msg);
        return 1;
    }
    for (int r = 0; r < RUNS; r++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
            return 1;
        c.fd = sv[0], s.fd = sv[1];
        pthread_t th;
        uint64_t t0 = now_ns();
        pthread_create(&th, NULL, run, &s);
        run(&c);
        pthread_join(th, NULL);
        hs[r] = now_ns() - t0;
        close(sv[0]);
        close(sv[1]);
        if (c.rc || s.rc)
            return 1;
        sent = c.sent, recv = c.recv;
    }
    mpc_tls_free(c.t);
    mpc_tls_free(s.t);
    for (int r = 0; r < RUNS; r++) {
        snprintf(kd, sizeof kd, "%s/k%d", dir, r);
        mpc_tls_remove_keys(kd, 3);
    }
    rmdir(dir);
    qsort(mk, RUNS, sizeof *mk, cmp_u64);
    qsort(hs, RUNS, sizeof *hs, cmp_u64);
    printf("TLS 1.3 handshake (mutual Ed25519 certificates + confirmation), socketpair, %d runs:\n"
           "  median %.3f ms (min %.3f, max %.3f); %llu B from the dialling side, %llu B from the "
           "accepting side\n",
           RUNS, hs[RUNS / 2] * 1e-6, hs[0] * 1e-6, hs[RUNS - 1] * 1e-6, (unsigned long long)sent,
           (unsigned long long)recv);
    printf("key folder for 3 nodes (mpcsim party keys), %d runs: median %.3f ms (min %.3f, max "
           "%.3f)\n",
           RUNS, mk[RUNS / 2] * 1e-6, mk[0] * 1e-6, mk[RUNS - 1] * 1e-6);
    return 0;
}

/* bench_trace.c — replay-side read rates of recorded and synthetic traces, and peak memory as
 * the context grows (figures only; nothing here passes or fails on timing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sim/trace/trace.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* Streams every position and layer: q + attention row; returns rows per second. */
static double stream_all(trace *t, double *bytes)
{
    const trace_shape *s = trace_get_shape(t);
    errbuf e;
    double t0 = now(), sum = 0;
    *bytes = 0;
    for (uint32_t p = 0; p < s->n_tokens; p++) {
        if (trace_seek(t, p, &e) != MS_OK) {
            fprintf(stderr, "%s\n", e.msg);
            return 0;
        }
        for (uint32_t l = 0; l < s->n_layers; l++) {
            const float *att = trace_att(t, l);
            sum += att[p] + trace_q(t, l)[0];
            *bytes += 4.0 * s->n_heads * (p + 1 + s->head_dim);
        }
    }
    double dt = now() - t0;
    if (sum == 12345.678)
        printf("(unlikely)\n");
    return (double)s->n_tokens * s->n_layers * s->n_heads / dt;
}

static int bench_recorded(void)
{
    char dir[] = "/tmp/bench_trace-XXXXXX", text[1024];
    if (!mkdtemp(dir))
        return 1;
    const char *data = getenv("MPCSIM_DATA");
    snprintf(text, sizeof text, "%s/tests/data/tinystories_sample.txt", data ? data : ".");
    errbuf e;
    double t0 = now();
    if (trace_record("stories260K", text, 512, dir, &e) != MS_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double rec = now() - t0;
    trace *t = NULL;
    if (trace_open(dir, &t, &e) != MS_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const trace_shape *s = trace_get_shape(t);
    printf("recorded stories260K, %u tokens: record %.3f s (%.0f tokens/s)\n", s->n_tokens, rec,
           s->n_tokens / rec);
    double bytes, rate = stream_all(t, &bytes);
    printf("  stream q+att (read from att.npy): %.3g rows/s\n", rate);
    /* gather + attend over a random half of the keys at the last position */
    uint32_t n = s->n_tokens / 2, *idx = malloc(n * sizeof *idx);
    float *p = malloc(n * sizeof *p), out[64];
    for (uint32_t i = 0; i < n; i++)
        idx[i] = 2 * i;
    trace_seek(t, s->n_tokens - 1, &e);
    t0 = now();
    int reps = 200;
    for (int r = 0; r < reps; r++)
        for (uint32_t h = 0; h < s->n_heads; h++)
            trace_attend(t, r % s->n_layers, h, trace_q(t, r % s->n_layers) + h * s->head_dim, idx,
                         n, p, out);
    printf("  trace_attend on %u kept keys: %.3g keys/s\n", n,
           (double)reps * s->n_heads * n / (now() - t0));
    trace_close(t);
    free(idx);
    free(p);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) != 0;
}

/* A synthetic llama-2-7b trace at growing context: the query stream up to T-1, then one layer's
 * attention rows at T-1 (32 heads × T keys regenerated), and the peak RSS after each. */
static int bench_synth(void)
{
    model_cfg cfg;
    errbuf e;
    if (model_load("llama-2-7b", &cfg, &e) != MS_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    trace_synth p;
    trace_synth_defaults(&p);
    uint32_t Ts[] = {1024, 4096, 16384, 32768};
    printf("synthetic llama-2-7b (32 layers, 32 heads, d 128), one layer's rows at T-1:\n");
    printf("  %7s %12s %14s %16s %10s\n", "T", "seek s/tok", "att row s", "key·heads/s",
           "peak MiB");
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        uint32_t T = Ts[i];
        trace *t = NULL;
        if (trace_open_synth(&cfg, T, 1, &p, &t, &e) != MS_OK) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double t0 = now();
        trace_seek(t, T - 1, &e);
        double seek = (now() - t0) / T;
        t0 = now();
        const float *att = trace_att(t, 7);
        double dt = now() - t0;
        printf("  %7u %12.3g %14.3f %16.3g %10.1f%s\n", T, seek, dt, (double)T * 32 / dt,
               peak_mib(), att[0] >= 0 ? "" : " (?)");
        trace_close(t);
    }
    printf("  (an O(T^2) attention matrix at 32K would be 32*32768^2*4 B = 128 GiB per layer)\n");
    return 0;
}

int main(void)
{
    int rc = bench_recorded();
    rc |= bench_synth();
    return rc;
}

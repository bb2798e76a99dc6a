/* machine.c — machine profiles: load/write YAML, a built-in default, the compute model, and
 * calibration.
 *
 * A profile gives one core's local rates for the three kinds of work the cost engine records
 * (proto.h WK_*): 64-bit ring multiply-accumulates in matmuls, element-wise ring operations,
 * and PRG bytes (AES-CTR); the cores a party uses (`threads`); and per kind the parallel
 * efficiency measured on them. Compute time of a round = Σ_k work[k] / (rate[k] · s_k), with
 * the speed-up s_k of machine_speedup(): the work is cut into chunks of at least `grain` units
 * (SPU's and Eigen's 50000, machine.h), at most one chunk per core, and c > 1 chunks run
 * c · par_eff[k] times as fast as one core (sim/engine/SIMULATION.md, "Compute").
 *
 * File format (protocols/machines/<name>.yaml):
 *   format: mpcsim-machine 1
 *   name: default
 *   threads: 1
 *   mac_per_s: 1.1e9          # one core
 *   elem_per_s: 4.0e8
 *   prg_bytes_per_s: 2.0e9
 *   mac_par_eff: 0.95         # optional (default 1): measured by calibrate --threads N
 *   elem_par_eff: 0.8
 *   prg_par_eff: 0.97
 *   grain: 50000              # optional (default 50000)
 *   cpu: "…"                  # informational
 *   measured: "…"             # informational
 *   derivation: "…"           # informational: where a server profile's figures come from
 */
#include "machine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include <openssl/evp.h>

#include "protocols/base/datadir.h"
#include "protocols/base/yschema.h"

#define MACHINE_FORMAT "mpcsim-machine 1"

/* ---- defaults ---------------------------------------------------------------------------- */

void machine_default(machine_profile *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "builtin");
    /* Conservative single-core figures of a 2020s x86 server core (the order of magnitude
     * `mpcsim calibrate` measures on such machines): a naive 64-bit ring matmul ~1e9 MAC/s,
     * a streamed element-wise ring op ~5e8/s, AES-NI CTR ~2 GB/s. */
    m->rate[WK_MAC] = 1e9;
    m->rate[WK_ELEM] = 5e8;
    m->rate[WK_PRG] = 2e9;
    m->threads = 1;
    for (int k = 0; k < WK_N; k++)
        m->par_eff[k] = 1;
    m->grain = MACHINE_GRAIN_DEFAULT;
}

/* ---- the compute model ------------------------------------------------------------------- */

double machine_speedup(const machine_profile *m, int k, double work)
{
    int th = m->threads > 0 ? m->threads : 1;
    if (th == 1 || !(work > 0))
        return 1;
    double g = m->grain > 0 ? m->grain : MACHINE_GRAIN_DEFAULT;
    double c = ceil(work / g);
    if (c > th)
        c = th;
    if (c <= 1)
        return 1;
    double s = c * (m->par_eff[k] > 0 ? m->par_eff[k] : 1);
    return s > 1 ? s : 1;
}

double machine_seconds(const machine_profile *m, const double *work)
{
    double s = 0;
    for (int k = 0; k < WK_N; k++)
        if (work[k] > 0)
            s += work[k] / (m->rate[k] * machine_speedup(m, k, work[k]));
    return s;
}

/* ---- load -------------------------------------------------------------------------------- */

#define R(k) YS_AT(machine_profile, rate[k])
#define E(k) YS_AT(machine_profile, par_eff[k])
static const ys_field fields[] = {
    {"format", YS_FIXED, YS_NONE, 0, 0, MACHINE_FORMAT, "file format", NULL, YS_REQ,
     "regenerate the file with `mpcsim calibrate -o FILE`", NULL},
    {"name", YS_STR, YS_AT(machine_profile, name), 0, 0, NULL, "profile name", NULL, 0, NULL, NULL},
    {"threads", YS_INT, YS_AT(machine_profile, threads), 1, 4096, "1", "cores a party uses", NULL,
     0, NULL, NULL},
    {"mac_per_s", YS_DBL, R(WK_MAC), 1, 1e18, NULL, "64-bit ring MACs per second (matmul)", NULL,
     YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"elem_per_s", YS_DBL, R(WK_ELEM), 1, 1e18, NULL, "element-wise ring ops per second", NULL,
     YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"prg_bytes_per_s", YS_DBL, R(WK_PRG), 1, 1e18, NULL, "AES-CTR PRG bytes per second", NULL,
     YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"mac_par_eff", YS_DBL, E(WK_MAC), 1e-3, 2, "1", "MACs' parallel efficiency on `threads` cores",
     NULL, 0, "`mpcsim calibrate --threads N` measures it", NULL},
    {"elem_par_eff", YS_DBL, E(WK_ELEM), 1e-3, 2, "1", "element-wise ops' parallel efficiency",
     NULL, 0, "`mpcsim calibrate --threads N` measures it", NULL},
    {"prg_par_eff", YS_DBL, E(WK_PRG), 1e-3, 2, "1", "PRG output's parallel efficiency", NULL, 0,
     "`mpcsim calibrate --threads N` measures it", NULL},
    {"grain", YS_DBL, YS_AT(machine_profile, grain), 1, 1e12, "50000",
     "smallest chunk of work per thread", NULL, 0, NULL, NULL},
    {"cpu", YS_INFO, YS_NONE, 0, 0, NULL, "the CPU it was measured on", NULL, 0, NULL, NULL},
    {"measured", YS_INFO, YS_NONE, 0, 0, NULL, "when and how it was measured", NULL, 0, NULL, NULL},
    {"derivation", YS_INFO, YS_NONE, 0, 0, NULL, "where a modelled profile's figures come from",
     NULL, 0, NULL, NULL},
};
#undef R
#undef E
static const ys_schema schema = YS_SCHEMA("machine profile", fields, "sim/engine/machine.h");

const ys_schema *machine_schema(void) { return &schema; }

static void resolve_path(const char *name_or_path, char *out, size_t sz)
{
    size_t l = strlen(name_or_path);
    if (strchr(name_or_path, '/') || (l > 5 && !strcmp(name_or_path + l - 5, ".yaml")))
        snprintf(out, sz, "%s", name_or_path);
    else
        snprintf(out, sz, "%s/protocols/machines/%s.yaml", mpcsim_datadir(), name_or_path);
}

int machine_load(const char *name_or_path, machine_profile *m, errbuf *e)
{
    char path[1024];
    resolve_path(name_or_path, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: cannot open machine profile: %s\n"
                       "  hint: name a profile in protocols/machines/ or a YAML path; "
                       "`mpcsim calibrate -o FILE` writes one; the data folder was looked for "
                       "in %s",
                       path, strerror(errno), where);
    }
    fclose(f);
    machine_profile tmp;
    machine_default(&tmp);
    yx_node *root;
    int rc = yx_parse_file(path, &root, e);
    if (rc)
        return rc;
    ys_ctx x = {path, e, 0};
    rc = ys_read(&x, root, &schema, NULL, 0, &tmp);
    yx_free(root);
    if (rc == MS_OK)
        *m = tmp;
    return rc;
}

/* ---- write ------------------------------------------------------------------------------- */

int machine_write(const machine_profile *m, const char *path, errbuf *e)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f)
        return err_set(e, MS_ERR_IO, "%s: error: cannot write machine profile: %s", path,
                       strerror(errno));
    fprintf(f,
            "format: %s\nname: %s\nthreads: %d\n"
            "mac_per_s: %.4g        # 64-bit ring multiply-accumulates per second (matmul)\n"
            "elem_per_s: %.4g       # element-wise 64-bit ring operations per second\n"
            "prg_bytes_per_s: %.4g  # AES-128-CTR PRG output bytes per second\n"
            "mac_par_eff: %.3f        # aggregate rate on `threads` cores / (threads x one core)\n"
            "elem_par_eff: %.3f\n"
            "prg_par_eff: %.3f\n"
            "grain: %.6g            # smallest chunk of work per thread (units)\n",
            MACHINE_FORMAT, m->name, m->threads, m->rate[WK_MAC], m->rate[WK_ELEM], m->rate[WK_PRG],
            m->par_eff[WK_MAC], m->par_eff[WK_ELEM], m->par_eff[WK_PRG], m->grain);
    int bad = ferror(f);
    if (path && fclose(f) != 0)
        bad = 1;
    if (bad)
        return err_set(e, MS_ERR_IO, "%s: error: write failed", path ? path : "<stdout>");
    return MS_OK;
}

/* ---- calibrate --------------------------------------------------------------------------- */

/* Each kernel runs repetitions of one fixed piece of work; with nth threads every repetition
 * is split into nth contiguous slices (output rows of the matmul, element ranges, PRG byte
 * ranges) and the threads meet at a barrier after each one, as a parallel loop's workers join
 * after every op. The measured rate is units done / wall time, so it includes the split's
 * synchronization and the threads' contention for memory bandwidth and shared caches. */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile uint64_t calib_sink; /* keeps the measured loops from being optimized out */

#define CAL_MAT_N 192         /* (n×n)·(n×n) ring matmul: 7.1 M MACs per repetition */
#define CAL_ELEM_N (1u << 20) /* z = x·y − z over 2^20 elements: 24 MiB of operands */
#define CAL_PRG_N (1u << 20)  /* 1 MiB of AES-128-CTR output */
#define CAL_THREADS_MAX 256

typedef struct cal_job {
    int kind, nth;
    uint64_t *x, *y, *z;     /* matmul and element-wise operands */
    unsigned char *in, *out; /* PRG */
    EVP_CIPHER_CTX *ctx[CAL_THREADS_MAX];
    pthread_barrier_t bar;
    pthread_mutex_t mu; /* the start gate: go 0 wait, 1 run, -1 abort */
    pthread_cond_t cv;
    int go;
    volatile int stop;
    double units[CAL_THREADS_MAX];
} cal_job;

/* One repetition's slice tid of nth; returns the units done. */
static double cal_slice(cal_job *j, int tid)
{
    int nth = j->nth;
    if (j->kind == WK_MAC) { /* z = x·y over Z_2^64, rows [r0, r1), i-k-j order */
        const size_t n = CAL_MAT_N, r0 = n * (size_t)tid / (size_t)nth,
                     r1 = n * (size_t)(tid + 1) / (size_t)nth;
        memset(j->z + r0 * n, 0, (r1 - r0) * n * sizeof *j->z);
        for (size_t i = r0; i < r1; i++)
            for (size_t k = 0; k < n; k++) {
                uint64_t a = j->x[i * n + k];
                const uint64_t *yr = j->y + k * n;
                uint64_t *zr = j->z + i * n;
                for (size_t c = 0; c < n; c++)
                    zr[c] += a * yr[c];
            }
        return (double)((r1 - r0) * n * n);
    }
    if (j->kind == WK_ELEM) { /* one Beaver-style local step: a ring mul and a sub */
        const size_t n = CAL_ELEM_N, i0 = n * (size_t)tid / (size_t)nth,
                     i1 = n * (size_t)(tid + 1) / (size_t)nth;
        uint64_t *x = j->x, *y = j->y, *z = j->z;
        for (size_t i = i0; i < i1; i++)
            z[i] = x[i] * y[i] - z[i];
        return 2.0 * (double)(i1 - i0);
    }
    const size_t n = CAL_PRG_N, b0 = n * (size_t)tid / (size_t)nth,
                 b1 = n * (size_t)(tid + 1) / (size_t)nth;
    int len;
    if (EVP_EncryptUpdate(j->ctx[tid], j->out + b0, &len, j->in + b0, (int)(b1 - b0)) != 1)
        return -1;
    return (double)(b1 - b0);
}

static void *cal_worker(void *arg)
{
    cal_job *j = ((void **)arg)[0];
    int tid = (int)(intptr_t)((void **)arg)[1];
    pthread_mutex_lock(&j->mu);
    while (!j->go)
        pthread_cond_wait(&j->cv, &j->mu);
    int go = j->go;
    pthread_mutex_unlock(&j->mu);
    if (go < 0)
        return NULL;
    for (;;) {
        pthread_barrier_wait(&j->bar);
        if (j->stop)
            break;
        double u = cal_slice(j, tid);
        j->units[tid] += u > 0 ? u : 0;
        pthread_barrier_wait(&j->bar);
    }
    return NULL;
}

/* The job's inputs: an AES-CTR stream per thread for the PRG kernel, else the words x, y, z
 * (n each) of the others; 0 on failure. */
static int cal_inputs(cal_job *j, size_t n)
{
    static const unsigned char key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const unsigned char iv[16] = {0};
    if (j->kind == WK_PRG) {
        int ok = (j->in = calloc(2, CAL_PRG_N)) != NULL;
        j->out = ok ? j->in + CAL_PRG_N : NULL;
        for (int t = 0; ok && t < j->nth; t++) { /* one AES-CTR stream per thread */
            unsigned char tiv[16];
            memcpy(tiv, iv, sizeof tiv);
            tiv[0] = (unsigned char)t;
            ok = (j->ctx[t] = EVP_CIPHER_CTX_new()) &&
                 EVP_EncryptInit_ex(j->ctx[t], EVP_aes_128_ctr(), NULL, key, tiv) == 1;
        }
        return ok;
    }
    if (!(j->x = malloc(3 * n * sizeof *j->x)))
        return 0;
    j->y = j->x + n;
    j->z = j->y + n;
    for (size_t i = 0; i < n; i++) {
        j->x[i] = i * 0x9E3779B97F4A7C15ull;
        j->y[i] = i ^ 0xD1B54A32D192ED03ull;
        j->z[i] = ~i;
    }
    return 1;
}

/* Thread 0's part once every worker runs: slices in lockstep until budget seconds have
 * passed, then the stop; the aggregate rate (units/s), 0 if a slice failed. */
static double cal_timed(cal_job *j, size_t n, double budget)
{
    int ok = 1;
    double t0 = now_s(), t;
    do {
        pthread_barrier_wait(&j->bar);
        double u = cal_slice(j, 0);
        ok &= u >= 0;
        j->units[0] += u > 0 ? u : 0;
        pthread_barrier_wait(&j->bar);
    } while ((t = now_s() - t0) < budget);
    j->stop = 1;
    pthread_barrier_wait(&j->bar);
    double units = 0;
    for (int t2 = 0; t2 < j->nth; t2++)
        units += j->units[t2];
    calib_sink += j->kind == WK_PRG ? j->out[CAL_PRG_N / 2] : j->z[n / 2];
    return ok ? units / t : 0;
}

/* Aggregate rate (units/s) of kernel `kind` on nth threads over about `budget` seconds. */
static double cal_measure(int kind, int nth, double budget)
{
    cal_job *j = calloc(1, sizeof *j);
    if (!j)
        return 0;
    j->kind = kind;
    j->nth = nth;
    size_t n = kind == WK_MAC ? (size_t)CAL_MAT_N * CAL_MAT_N : CAL_ELEM_N;
    double rate = 0;
    int started = 0;
    pthread_t th[CAL_THREADS_MAX];
    void *args[CAL_THREADS_MAX][2];
    int ok = cal_inputs(j, n) && pthread_barrier_init(&j->bar, NULL, (unsigned)nth) == 0;
    int have_bar = ok;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    for (int t = 1; ok && t < nth; t++) {
        args[t][0] = j;
        args[t][1] = (void *)(intptr_t)t;
        ok = pthread_create(&th[t], NULL, cal_worker, args[t]) == 0;
        started = ok ? t : started;
    }
    pthread_mutex_lock(&j->mu); /* every thread started (or none will run) */
    j->go = ok ? 1 : -1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (ok)
        rate = cal_timed(j, n, budget);
    for (int t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    if (have_bar)
        pthread_barrier_destroy(&j->bar);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    for (int t = 0; t < nth; t++)
        EVP_CIPHER_CTX_free(j->ctx[t]);
    free(kind == WK_PRG ? (void *)j->in : (void *)j->x);
    free(j);
    return rate;
}

int machine_calibrate(machine_profile *m, double seconds_budget, int threads,
                      double measured_rate_n[WK_N])
{
    if (!(seconds_budget > 0))
        seconds_budget = 3;
    if (threads < 1 || threads > CAL_THREADS_MAX)
        return MS_ERR_RANGE;
    machine_default(m);
    snprintf(m->name, sizeof m->name, "calibrated");
    double per = seconds_budget / (threads > 1 ? 2 * WK_N : WK_N);
    for (int k = 0; k < WK_N; k++) {
        m->rate[k] = cal_measure(k, 1, per);
        double rn = threads > 1 ? cal_measure(k, threads, per) : m->rate[k];
        if (!(m->rate[k] > 0) || !(rn > 0))
            return MS_ERR_INTERNAL;
        /* measured; a shared or oversubscribed machine can even show < 1/threads */
        double eff = rn / (threads * m->rate[k]);
        m->par_eff[k] = eff > 2 ? 2 : eff < 1e-3 ? 1e-3 : eff;
        if (measured_rate_n)
            measured_rate_n[k] = rn;
    }
    m->threads = threads;
    return MS_OK;
}

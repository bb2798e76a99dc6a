/* machine.c — machine profiles: load/write YAML, a built-in default, and calibration.
 *
 * A profile gives a party's local rates for the three kinds of work the cost engine records
 * (proto.h WK_*): 64-bit ring multiply-accumulates in matmuls, element-wise ring operations,
 * and PRG bytes (AES-CTR). Compute time of a round = Σ_k work[k] / (rate[k] · threads): a
 * party's `threads` cores are assumed to scale linearly (an upper bound on the speed-up).
 *
 * File format (protocols/machines/<name>.yaml):
 *   format: mpcsim-machine 1
 *   name: default
 *   threads: 1
 *   mac_per_s: 1.1e9
 *   elem_per_s: 4.0e8
 *   prg_bytes_per_s: 2.0e9
 *   cpu: "…"            # informational
 */
#include "machine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
}

/* ---- load -------------------------------------------------------------------------------- */

#define R(k) YS_AT(machine_profile, rate[k])
static const ys_field fields[] = {
    {"format", YS_FIXED, YS_NONE, 0, 0, MACHINE_FORMAT, "file format", NULL, YS_REQ,
     "regenerate the file with `mpcsim calibrate -o FILE`", NULL},
    {"name", YS_STR, YS_AT(machine_profile, name), 0, 0, NULL, "profile name", NULL, 0, NULL,
     NULL},
    {"threads", YS_INT, YS_AT(machine_profile, threads), 1, 4096, "1", "cores a party uses",
     NULL, 0, NULL, NULL},
    {"mac_per_s", YS_DBL, R(WK_MAC), 1, 1e18, NULL, "64-bit ring MACs per second (matmul)",
     NULL, YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"elem_per_s", YS_DBL, R(WK_ELEM), 1, 1e18, NULL, "element-wise ring ops per second", NULL,
     YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"prg_bytes_per_s", YS_DBL, R(WK_PRG), 1, 1e18, NULL, "AES-CTR PRG bytes per second", NULL,
     YS_REQ, "run `mpcsim calibrate` to measure it", NULL},
    {"cpu", YS_INFO, YS_NONE, 0, 0, NULL, "the CPU it was measured on", NULL, 0, NULL, NULL},
    {"measured", YS_INFO, YS_NONE, 0, 0, NULL, "when and how it was measured", NULL, 0, NULL,
     NULL},
};
#undef R
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
        return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open machine profile: %s\n"
                       "  hint: name a profile in protocols/machines/ or a YAML path; "
                       "`mpcsim calibrate -o FILE` writes one; the data folder was looked for "
                       "in %s", path, strerror(errno), where);
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
    fprintf(f, "format: %s\nname: %s\nthreads: %d\n"
               "mac_per_s: %.4g        # 64-bit ring multiply-accumulates per second (matmul)\n"
               "elem_per_s: %.4g       # element-wise 64-bit ring operations per second\n"
               "prg_bytes_per_s: %.4g  # AES-128-CTR PRG output bytes per second\n",
            MACHINE_FORMAT, m->name, m->threads, m->rate[WK_MAC], m->rate[WK_ELEM],
            m->rate[WK_PRG]);
    int bad = ferror(f);
    if (path && fclose(f) != 0)
        bad = 1;
    if (bad)
        return err_set(e, MS_ERR_IO, "%s: error: write failed", path ? path : "<stdout>");
    return MS_OK;
}

/* ---- calibrate --------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile uint64_t calib_sink; /* keeps the measured loops from being optimized out */

/* z = x·y over Z_2^64, (n×n)·(n×n), i-k-j order as a share matmul is written. */
static void ring_matmul(uint64_t *z, const uint64_t *x, const uint64_t *y, size_t n)
{
    memset(z, 0, n * n * sizeof *z);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++) {
            uint64_t a = x[i * n + k];
            const uint64_t *yr = y + k * n;
            uint64_t *zr = z + i * n;
            for (size_t j = 0; j < n; j++)
                zr[j] += a * yr[j];
        }
}

static double measure_mac(double budget)
{
    const size_t n = 192;
    uint64_t *x = malloc(3 * n * n * sizeof *x);
    if (!x)
        return 0;
    uint64_t *y = x + n * n, *z = y + n * n;
    for (size_t i = 0; i < n * n; i++) {
        x[i] = i * 0x9E3779B97F4A7C15ull;
        y[i] = i ^ 0xD1B54A32D192ED03ull;
    }
    double t0 = now_s(), t;
    uint64_t reps = 0;
    do {
        ring_matmul(z, x, y, n);
        calib_sink += z[reps % (n * n)];
        reps++;
    } while ((t = now_s() - t0) < budget);
    free(x);
    return (double)reps * (double)(n * n * n) / t;
}

static double measure_elem(double budget)
{
    const size_t n = 1u << 20;
    uint64_t *x = malloc(3 * n * sizeof *x);
    if (!x)
        return 0;
    uint64_t *y = x + n, *z = y + n;
    for (size_t i = 0; i < n; i++) {
        x[i] = i * 0x9E3779B97F4A7C15ull;
        y[i] = ~i;
    }
    double t0 = now_s(), t;
    uint64_t reps = 0;
    do {
        /* one Beaver-style local step per element: z = x·y − z (a ring mul and a sub count
         * as two element operations) */
        for (size_t i = 0; i < n; i++)
            z[i] = x[i] * y[i] - z[i];
        calib_sink += z[reps % n];
        reps++;
    } while ((t = now_s() - t0) < budget);
    free(x);
    return 2.0 * (double)reps * (double)n / t;
}

static double measure_prg(double budget)
{
    const size_t n = 1u << 20;
    unsigned char *buf = calloc(2, n);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    static const unsigned char key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const unsigned char iv[16] = {0};
    double rate = 0;
    if (buf && ctx && EVP_EncryptInit_ex(ctx, EVP_aes_128_ctr(), NULL, key, iv) == 1) {
        double t0 = now_s(), t;
        uint64_t reps = 0;
        int len, ok = 1;
        do {
            ok = EVP_EncryptUpdate(ctx, buf + n, &len, buf, (int)n) == 1;
            reps++;
        } while (ok && (t = now_s() - t0) < budget);
        calib_sink += buf[n + reps % n];
        rate = ok ? (double)reps * (double)n / t : 0;
    }
    EVP_CIPHER_CTX_free(ctx);
    free(buf);
    return rate;
}

int machine_calibrate(machine_profile *m, double seconds_budget)
{
    if (!(seconds_budget > 0))
        seconds_budget = 3;
    machine_default(m);
    snprintf(m->name, sizeof m->name, "calibrated");
    double per = seconds_budget / 3;
    m->rate[WK_MAC] = measure_mac(per);
    m->rate[WK_ELEM] = measure_elem(per);
    m->rate[WK_PRG] = measure_prg(per);
    m->threads = 1;
    for (int k = 0; k < WK_N; k++)
        if (!(m->rate[k] > 0))
            return MS_ERR_INTERNAL;
    return MS_OK;
}

/* scn_yaml.c — a resolved run's canonical YAML and its hash, and the protocol of a stored
 * config. Part of the scenario reader (scn.c; shared declarations in scn_int.h). */
#include "scn_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "sim/policy/policy.h"
#include "sim/trace/trace.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

/* ---- canonical YAML ---------------------------------------------------------------------- */

static int plain_ok(const char *s)
{
    if (!*s || yx_is_null(&(yx_node){.kind = YX_SCALAR, .str = (char *)s}) || bool_text(s) >= 0 ||
        !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_./",
                s[0]))
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-") ==
           strlen(s);
}

static void put_str(FILE *f, const char *s)
{
    if (plain_ok(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A free parameter value: numbers and booleans as written (already normalized), text quoted
 * when it needs to be. */
static void put_val(FILE *f, const char *s)
{
    double d;
    if (!parse_double(s, &d) || !strcmp(s, "true") || !strcmp(s, "false"))
        fputs(s, f);
    else
        put_str(f, s);
}

static void put_dbl(FILE *f, double d)
{
    char b[40];
    fmt_double(b, sizeof b, d);
    fputs(b, f);
}

static void put_field(FILE *f, const ys_field *fd, const void *base)
{
    const char *p = (const char *)base + fd->off;
    fprintf(f, "  %s: ", fd->key);
    if (fd->type == YS_U32)
        fprintf(f, "%u", *(const uint32_t *)p);
    else if (fd->type == YS_DBL)
        put_dbl(f, *(const double *)p);
    else if (fd->type == YS_BOOL)
        fputs(*(const int *)p ? "true" : "false", f);
    else if (fd->type == YS_ENUM) {
        int k = *(const int *)p, n = 0;
        while (fd->names[n])
            n++;
        fputs(k >= 0 && k < n ? fd->names[k] : "unknown", f);
    } else
        put_str(f, p);
    fputc('\n', f);
}

/* burst_bytes is written when set, or when the network's is (a link without a bucket under a
 * network-wide one): scenarios without buckets dump as before. */
static void put_link(FILE *f, const char *indent, const char *name, const net_link *l,
                     uint64_t net_burst)
{
    fprintf(f, "%s%s: {latency_ns: %llu, bandwidth_bps: ", indent, name,
            (unsigned long long)l->latency_ns);
    put_dbl(f, l->bandwidth_bps);
    if (l->burst_bytes || net_burst)
        fprintf(f, ", burst_bytes: %llu", (unsigned long long)l->burst_bytes);
    fputs("}\n", f);
}

static void put_network(FILE *f, const run_cfg *c)
{
    const net_cfg *n = &c->net;
    const net_link *b = &n->link[0][1];
    fputs("network:\n", f);
    if (strcmp(c->net_ref, "custom")) {
        fputs("  preset: ", f);
        put_str(f, c->net_ref);
        fputc('\n', f);
    }
    fputs("  name: ", f);
    put_str(f, n->name);
    fprintf(f, "\n  latency_ns: %llu\n  bandwidth_bps: ", (unsigned long long)b->latency_ns);
    put_dbl(f, b->bandwidth_bps);
    fputc('\n', f);
    if (b->burst_bytes)
        fprintf(f, "  burst_bytes: %llu\n", (unsigned long long)b->burst_bytes);
    put_link(f, "  ", "dealer", &n->dealer, b->burst_bytes);
    if (n->wire.mtu &&
        n->wire.tls_record) /* TLS keys only when set: plain framings keep their text */
        fprintf(f,
                "  wire: {mtu: %u, l2_bytes: %u, l3l4_bytes: %u, ack_every: %u, msg_bytes: %u, "
                "tls_record: %u, "
                "tls_overhead: %u}\n",
                n->wire.mtu, n->wire.l2_bytes, n->wire.l3l4_bytes, n->wire.ack_every,
                n->wire.msg_bytes, n->wire.tls_record, n->wire.tls_overhead);
    else if (n->wire.mtu)
        fprintf(f,
                "  wire: {mtu: %u, l2_bytes: %u, l3l4_bytes: %u, ack_every: %u, msg_bytes: %u}\n",
                n->wire.mtu, n->wire.l2_bytes, n->wire.l3l4_bytes, n->wire.ack_every,
                n->wire.msg_bytes);
    int any = 0;
    for (int i = 0; i < n->n_parties; i++)
        for (int j = 0; j < n->n_parties; j++) {
            const net_link *l = &n->link[i][j];
            if (i == j || (l->latency_ns == b->latency_ns && l->bandwidth_bps == b->bandwidth_bps &&
                           l->burst_bytes == b->burst_bytes))
                continue;
            if (!any++)
                fputs("  links:\n", f);
            char name[32];
            snprintf(name, sizeof name, "%d->%d", i, j);
            put_link(f, "    ", name, l, b->burst_bytes);
        }
}

/* Protocol keys the canonical YAML writes only away from the value they had before the key
 * existed, so runs resolved before then keep their hash: in a stored config, an absent key
 * means that value (scn_stored_protocol). */
static const struct {
    const char *key;
    size_t off, size;
    const char *was;
} absent_keys[] = {
    {"msb", YS_AT(proto_cfg, msb), "ks"},
    {"topk", YS_AT(proto_cfg, topk), "network"},
    {"exp", YS_AT(proto_cfg, exp), "taylor"},
    {"normalize", YS_AT(proto_cfg, normalize), "thresholds"},
    {"compat", YS_AT(proto_cfg, compat), "native"},
    {"gather", YS_AT(proto_cfg, gather), "rows"}, /* scores changes a selection's ops */
};
#define N_ABSENT_KEYS (sizeof absent_keys / sizeof absent_keys[0])

static void put_protocol(FILE *f, const proto_cfg *p)
{
    fputs("protocol:\n  name: ", f);
    put_str(f, p->name);
    fprintf(f,
            "\n  ring_bits: %d\n  frac_bits: %d\n  exp_iters: %d\n  recip_iters: %d\n"
            "  rsqrt_iters: %d\n  softmax_clip: ",
            p->ring_bits, p->frac_bits, p->exp_iters, p->recip_iters, p->rsqrt_iters);
    put_dbl(f, p->softmax_clip);
    fprintf(f, "\n  beaver_cache: %s\n  trunc_local: %s\n  approx: ",
            p->beaver_cache ? "true" : "false", p->trunc_local ? "true" : "false");
    put_str(f, p->approx);
    fputc('\n', f);
    for (size_t i = 0; i < N_ABSENT_KEYS; i++) {
        const char *v = (const char *)p + absent_keys[i].off;
        if (v[0] && strcmp(v, absent_keys[i].was)) {
            fprintf(f, "  %s: ", absent_keys[i].key);
            put_str(f, v);
            fputc('\n', f);
        }
    }
    /* aby3 with trunc_local off ran Share Truncation I before the truncation pair existed:
     * naming the pair keeps those runs' hashes from matching runs that use it */
    const proto *pr = proto_find(p->name);
    if (pr && pr->legacy_trunc_local && !p->trunc_local)
        fputs("  trunc: pair\n", f);
}

void scn_stored_protocol(const yx_node *root, proto_cfg *p)
{
    const yx_node *m = root ? yx_map_get(root, "protocol") : NULL;
    if (!m || m->kind != YX_MAP)
        return;
    for (size_t i = 0; i < N_ABSENT_KEYS; i++)
        if (!yx_map_get(m, absent_keys[i].key))
            snprintf((char *)p + absent_keys[i].off, absent_keys[i].size, "%s", absent_keys[i].was);
    /* before the pair, aby3 truncated by Share Truncation I whatever trunc_local said */
    const proto *pr = proto_find(p->name);
    if (pr && pr->legacy_trunc_local && !yx_map_get(m, "trunc"))
        p->trunc_local = 1;
}

static void put_params(FILE *f, const char *indent, const kv_param *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s%s: ", indent, kv[i].key);
        put_val(f, kv[i].val);
        fputc('\n', f);
    }
}

static void put_run(FILE *f, const run_cfg *c)
{
    fprintf(f, "format: %d\nmodel:\n", SCN_FORMAT);
    if (strcmp(c->model_ref, "inline")) {
        fputs("  base: ", f);
        put_str(f, c->model_ref);
        fputc('\n', f);
    }
    const ys_schema *ms = model_schema();
    for (size_t i = 0; i < ms->n; i++)
        if (ms->field[i].type != YS_FIXED) /* 'format' belongs to model files */
            put_field(f, &ms->field[i], &c->model);
    put_protocol(f, &c->proto);
    put_network(f, c);
    fputs("machine:\n  name: ", f);
    put_str(f, c->machine.name);
    for (int k = 0; k < WK_N; k++) {
        fprintf(f, "\n  %s: ", mach_keys[2 + k]);
        put_dbl(f, c->machine.rate[k]);
    }
    fprintf(f, "\n  threads: %d", c->machine.threads);
    for (int k = 0; k < WK_N; k++) {
        fprintf(f, "\n  %s: ", mach_keys[6 + k]);
        put_dbl(f, c->machine.par_eff[k]);
    }
    fputs("\n  grain: ", f);
    put_dbl(f, c->machine.grain);
    fputc('\n', f);
    fprintf(f,
            "workload:\n  prompt_len: %u\n  decode_len: %u\n  batch: %u\n"
            "  prefill_in_mpc: %s\n  decode_stride: %u\n",
            c->work.prompt_len, c->work.decode_len, c->work.batch,
            c->work.prefill_in_mpc ? "true" : "false", c->work.decode_stride);
    fprintf(f, "trace:\n  source: %s\n", c->trace.source);
    if (!strcmp(c->trace.source, "record") || !strcmp(c->trace.source, "npy")) {
        fputs(!strcmp(c->trace.source, "record") ? "  text: " : "  path: ", f);
        put_str(f, c->trace.path);
        fputc('\n', f);
    }
    if (!strcmp(c->trace.source, "synth")) {
        /* a GQA shape's trace depends on group_sim (added after these runs were first keyed):
         * its value is part of the run, so results of older builds are not taken for these */
        int gqa = c->model.n_kv_heads && c->model.n_kv_heads < c->model.n_heads, given = 0;
        for (size_t i = 0; i < c->trace.n_params; i++)
            given |= !strcmp(c->trace.params[i].key, "group_sim");
        fputs(c->trace.n_params || (gqa && !given) ? "  params:\n" : "  params: {}\n", f);
        /* in key order, as a scenario that names it reads back */
        size_t at = 0;
        while (at < c->trace.n_params && strcmp(c->trace.params[at].key, "group_sim") < 0)
            at++;
        put_params(f, "    ", c->trace.params, at);
        if (gqa && !given) {
            trace_synth sp;
            trace_synth_defaults_for(&sp, c->model.family);
            fprintf(f, "    group_sim: %.9g\n", sp.group_sim);
        }
        put_params(f, "    ", c->trace.params + at, c->trace.n_params - at);
    }
    fputs("policies:\n  - name: ", f);
    put_str(f, c->policy.name);
    fputc('\n', f);
    put_params(f, "    ", c->policy.params, c->policy.n_params);
    fprintf(f, "seed: %llu\noverlap: %s\n", (unsigned long long)c->seed,
            c->overlap ? "true" : "false");
}

/* FNV-1a, 64 bit. */
static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int scn_resolve_yaml(run_cfg *c, errbuf *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    put_run(f, c);
    if (fclose(f) || !buf) {
        free(buf);
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    free(c->yaml);
    c->yaml = buf;
    snprintf(c->hash, sizeof c->hash, "%016llx", (unsigned long long)fnv1a(buf, len));
    return MS_OK;
}

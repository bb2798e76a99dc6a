/* targets.c — the fuzz targets of fuzz.h. Inputs that need files (trace directories, model
 * YAML, checkpoints, tokenizers) are written to a private folder under $TMPDIR (or /tmp)
 * that the target removes before it returns. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/llama.h"
#include "protocols/base/yamlx.h"
#include "results/rdb.h"
#include "sim/scenario/runlabel.h"
#include "models/model.h"
#include "protocols/backend/mpc_net.h"
#include "protocols/program/op.h"
#include "sim/scenario/scn.h"
#include "sim/serve/workload.h"
#include "sim/trace/trace.h"

/* ---- files ------------------------------------------------------------------------------ */

typedef struct scratch {
    char dir[256];
    char path[8][320];
    int n;
} scratch;

static int scratch_open(scratch *s)
{
    const char *t = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/mpcsim-fuzz-XXXXXX", t && *t ? t : "/tmp");
    s->n = 0;
    return mkdtemp(s->dir) ? 0 : -1;
}

static const char *scratch_file(scratch *s, const char *name, const uint8_t *d, size_t n)
{
    if (s->n == 8)
        return NULL;
    char *p = s->path[s->n], tmp[sizeof s->path[0]];
    snprintf(tmp, sizeof tmp, "%s/%s", s->dir, name);
    memcpy(p, tmp, sizeof tmp);
    FILE *f = fopen(p, "wb");
    if (!f)
        return NULL;
    int ok = fwrite(d, 1, n, f) == n;
    if (fclose(f) != 0 || !ok)
        return NULL;
    s->n++;
    return p;
}

static void scratch_close(scratch *s)
{
    for (int i = 0; i < s->n; i++)
        unlink(s->path[i]);
    rmdir(s->dir);
}

static char *cstr(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, d, n);
        s[n] = '\0';
    }
    return s;
}

/* Splits off a part prefixed by its 16-bit little-endian length (the rest when short). */
static size_t take(const uint8_t **d, size_t *n, const uint8_t **part)
{
    size_t len = *n;
    if (*n >= 2) {
        len = (size_t)((*d)[0] | (*d)[1] << 8);
        *d += 2;
        *n -= 2;
        if (len > *n)
            len = *n;
    }
    *part = *d;
    *d += len;
    *n -= len;
    return len;
}

/* ---- YAML -------------------------------------------------------------------------------- */

int fuzz_scenario(const uint8_t *data, size_t n)
{
    char *text = cstr(data, n);
    if (!text)
        return 0;
    scenario s;
    errbuf e;
    if (scn_load("fuzz.yaml", text, &s, &e) == MS_OK)
        scn_free(&s);
    free(text);
    return 0;
}

int fuzz_model(const uint8_t *data, size_t n)
{
    scratch s;
    if (scratch_open(&s))
        return 0;
    const char *p = scratch_file(&s, "m.yaml", data, n);
    model_cfg cfg;
    errbuf e;
    if (p && model_load(p, &cfg, &e) == MS_OK)
        (void)model_check(&cfg, &e);
    scratch_close(&s);
    return 0;
}

/* ---- traces ----------------------------------------------------------------------------- */

int fuzz_npy(const uint8_t *data, size_t n)
{
    FILE *f = fmemopen((void *)data, n ? n : 1, "rb");
    if (!f)
        return 0;
    trace_npy h;
    errbuf e;
    uint64_t bytes;
    if (n && trace_npy_read_header(f, "fuzz.npy", &h, &e) == MS_OK)
        (void)trace_npy_bytes(&h, &bytes);
    fclose(f);
    return 0;
}

/* Input: manifest, q.npy, k.npy (each 16-bit length-prefixed), then v.npy. An opened trace is
 * read at every position (queries, attention rows, keys and values). */
int fuzz_trace(const uint8_t *data, size_t n)
{
    static const char *const names[] = {"manifest.yaml", "q.npy", "k.npy", "v.npy"};
    scratch s;
    if (scratch_open(&s))
        return 0;
    for (int i = 0; i < 4; i++) {
        const uint8_t *part;
        size_t len = i < 3 ? take(&data, &n, &part) : (part = data, n);
        if (!scratch_file(&s, names[i], part, len))
            break;
    }
    trace *t = NULL;
    errbuf e;
    if (trace_open(s.dir, &t, &e) == MS_OK) {
        const trace_shape *sh = trace_get_shape(t);
        size_t kv = (size_t)sh->n_kv_heads * sh->head_dim;
        float *k = malloc(kv * sizeof *k), *v = malloc(kv * sizeof *v);
        for (uint32_t pos = 0; k && v && pos < sh->n_tokens && pos < 64; pos++) {
            if (trace_seek(t, pos, &e) != MS_OK)
                break;
            for (uint32_t l = 0; l < sh->n_layers && l < 4; l++) {
                (void)trace_q(t, l);
                (void)trace_att(t, l);
                (void)trace_kv(t, l, pos, k, v);
            }
        }
        free(k);
        free(v);
        trace_close(t);
    }
    scratch_close(&s);
    return 0;
}

/* ---- llama2.c files ---------------------------------------------------------------------- */

/* A checkpoint whose model is the one its own header describes (as a model YAML written
 * for it would): the header's sizes are the hostile part. A loaded model runs one token. */
int fuzz_checkpoint(const uint8_t *data, size_t n)
{
    if (n < 28)
        return 0;
    int32_t h[7];
    memcpy(h, data, sizeof h);
    model_cfg cfg;
    model_cfg_init(&cfg);
    snprintf(cfg.name, sizeof cfg.name, "fuzz");
    cfg.family = FAM_LLAMA;
    cfg.dim = (uint32_t)h[0];
    cfg.ffn_dim = (uint32_t)h[1];
    cfg.n_layers = (uint32_t)h[2];
    cfg.n_heads = (uint32_t)h[3];
    cfg.n_kv_heads = (uint32_t)h[4];
    cfg.vocab = (uint32_t)(h[5] < 0 ? -(int64_t)h[5] : h[5]);
    cfg.max_ctx = (uint32_t)h[6];
    cfg.tied_embeddings = h[5] > 0;
    cfg.head_dim = cfg.n_heads ? cfg.dim / cfg.n_heads : 0;
    errbuf e;
    if (model_check(&cfg, &e) != MS_OK)
        return 0;
    scratch s;
    if (scratch_open(&s))
        return 0;
    const char *p = scratch_file(&s, "ckpt.bin", data, n);
    llama *m = NULL;
    if (p && llama_load(&cfg, p, &m, &e) == MS_OK) {
        float *logits = malloc((size_t)cfg.vocab * sizeof *logits);
        if (logits)
            (void)llama_forward(m, 1, 0, NULL, logits);
        free(logits);
        llama_free(m);
    }
    scratch_close(&s);
    return 0;
}

/* Input: the vocabulary size (16 bits), a text to encode (16-bit length-prefixed), then the
 * tokenizer file. Every encoded id is decoded back. */
int fuzz_tokenizer(const uint8_t *data, size_t n)
{
    if (n < 2)
        return 0;
    uint32_t vocab = (uint32_t)(data[0] | data[1] << 8);
    data += 2;
    n -= 2;
    const uint8_t *tp;
    size_t tl = take(&data, &n, &tp);
    char *text = cstr(tp, tl);
    scratch s;
    if (!text || scratch_open(&s)) {
        free(text);
        return 0;
    }
    const char *p = scratch_file(&s, "tok.bin", data, n);
    llama_tok *t = NULL;
    errbuf e;
    if (p && llama_tok_load(p, vocab, &t, &e) == MS_OK) {
        int *ids = malloc((strlen(text) + 3) * sizeof *ids);
        int k = ids ? llama_tok_encode(t, text, ids, (int)strlen(text) + 3) : -1;
        for (int i = 0; i < k; i++)
            (void)llama_tok_piece(t, i ? ids[i - 1] : 1, ids[i]);
        free(ids);
        llama_tok_free(t);
    }
    scratch_close(&s);
    free(text);
    return 0;
}

/* ---- serving, programs, frames ----------------------------------------------------------- */

int fuzz_workload(const uint8_t *data, size_t n)
{
    FILE *f = fmemopen((void *)data, n ? n : 1, "rb");
    if (!f)
        return 0;
    workload w;
    wl_init(&w);
    errbuf e;
    if (n)
        (void)wl_read(&w, f, "fuzz.wl", &e);
    wl_free(&w);
    fclose(f);
    return 0;
}

int fuzz_program(const uint8_t *data, size_t n)
{
    FILE *f = fmemopen((void *)data, n ? n : 1, "rb");
    if (!f)
        return 0;
    op_program p;
    op_program_init(&p);
    errbuf e;
    if (n && op_read(&p, f, "fuzz.prog", &e) == MS_OK) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            (void)op_write(&p, null);
            fclose(null);
        }
    }
    op_program_free(&p);
    fclose(f);
    return 0;
}

/* Every 32-byte header of the input, as the first frame of a connecting peer (its HELLO) of
 * each session shape, and as a frame expected in a round. */
int fuzz_frames(const uint8_t *data, size_t n)
{
    for (size_t off = 0; off + MPC_FRAME_HDR <= n; off += MPC_FRAME_HDR) {
        const uint8_t *h = data + off;
        errbuf e;
        for (int nodes = 2; nodes <= MPC_NODES_MAX; nodes++)
            for (int self = 0; self < nodes; self++)
                for (int tls = 0; tls < 2; tls++) {
                    int id = -1, chan = -1;
                    if (mpc_net_hello_parse(h, nodes, self, tls, &id, &chan, &e) == MS_OK &&
                        (id <= self || id >= nodes || chan < 0 || chan > 1))
                        abort(); /* a hello accepted for a node that cannot connect to us */
                }
        mpc_frame f;
        mpc_frame_decode(h, &f);
        (void)mpc_frame_check(&f, MPC_FR_DATA, 0, 64, &e);
    }
    return 0;
}

/* Every node of a tree, visited once (lookups on mappings), to touch what the builder made. */
static size_t yaml_walk(const yx_node *n)
{
    size_t k = 1;
    (void)yx_kind_name(n);
    if (n->kind == YX_MAP && n->n)
        (void)yx_map_get(n, n->key[0]->str);
    for (size_t i = 0; i < n->n; i++)
        k += (n->key ? yaml_walk(n->key[i]) : 0) + yaml_walk(n->item[i]);
    return k;
}

int fuzz_yaml(const uint8_t *data, size_t n)
{
    yx_node *root = NULL;
    errbuf e;
    if (yx_parse("fuzz.yaml", (const char *)data, n, &root, &e) == MS_OK) {
        if (yaml_walk(root) > 100000)
            abort(); /* the node bound of yamlx.c did not hold */
        yx_free(root);
    }
    return 0;
}

/* A results database as every reader opens it (version, read-only open and a count, the merge
 * check), then as a writer does, which migrates it and re-reads each stored config. */
int fuzz_resultsdb(const uint8_t *data, size_t n)
{
    scratch s;
    if (scratch_open(&s))
        return 0;
    const char *p = scratch_file(&s, "r.db", data, n);
    if (p) {
        errbuf e;
        int v;
        int64_t runs;
        rdb *db = NULL;
        rdb_set_labeler(run_labels_from_yaml);
        (void)rdb_file_version(p, &v, &e);
        if (rdb_open_ro(p, &db, &e) == MS_OK) {
            (void)rdb_count_runs(db, &runs, &e);
            rdb_close(db);
        }
        (void)rdb_merge_check(p, &e);
        if (rdb_open(p, 0, &db, &e) == MS_OK) {
            (void)rdb_count_runs(db, &runs, &e);
            rdb_close(db);
        }
        char side[400];
        snprintf(side, sizeof side, "%s-wal", p);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", p);
        unlink(side);
        snprintf(side, sizeof side, "%s-journal", p);
        unlink(side);
    }
    scratch_close(&s);
    return 0;
}

const fuzz_target fuzz_targets[] = {
    {"scenario", fuzz_scenario}, {"model", fuzz_model},           {"trace", fuzz_trace},
    {"npy", fuzz_npy},           {"checkpoint", fuzz_checkpoint}, {"tokenizer", fuzz_tokenizer},
    {"workload", fuzz_workload}, {"frames", fuzz_frames},         {"program", fuzz_program},
    {"yaml", fuzz_yaml},         {"resultsdb", fuzz_resultsdb},
};
const size_t fuzz_n_targets = sizeof fuzz_targets / sizeof fuzz_targets[0];

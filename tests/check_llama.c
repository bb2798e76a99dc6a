/* check_llama.c — the float reference against stories260K's published outputs, the tokenizer
 * against run.c's encodings, the hooks. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/llama.h"

TESTDIR("check_llama")

static llama *load_model(void)
{
    model_cfg cfg;
    errbuf e;
    char path[1024];
    ck_assert_msg(model_load("stories260K", &cfg, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(model_file_path(cfg.weights, path, sizeof path), 0);
    llama *m = NULL;
    ck_assert_msg(llama_load(&cfg, path, &m, &e) == MS_OK, "%s", e.msg);
    return m;
}

static llama_tok *load_tok(const llama *m)
{
    char path[1024];
    errbuf e;
    ck_assert_int_eq(model_file_path(llama_cfg(m)->tokenizer, path, sizeof path), 0);
    llama_tok *t = NULL;
    ck_assert_msg(llama_tok_load(path, llama_cfg(m)->vocab, &t, &e) == MS_OK, "%s", e.msg);
    return t;
}

/* Reads whitespace-separated numbers from a reference file. */
static size_t read_numbers(const char *rel, double *out, size_t max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/reference/%s", th_data(), rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t n = 0;
    while (n < max && fscanf(f, "%lf", &out[n]) == 1)
        n++;
    fclose(f);
    return n;
}

START_TEST(test_logits_bos)
{
    llama *m = load_model();
    double ref[512];
    ck_assert_uint_eq(read_numbers("logits_bos_pos0.txt", ref, 512), 512);
    float logits[512];
    ck_assert_int_eq(llama_forward(m, 1, 0, NULL, logits), MS_OK);
    double worst = 0;
    for (int i = 0; i < 512; i++)
        worst = fmax(worst, fabs(logits[i] - ref[i]));
    ck_assert_msg(worst <= 1e-4, "max |logit - reference| = %g", worst);
    ck_assert_int_eq((int)llama_argmaxf(logits, 512), 403);
    llama_free(m);
}
END_TEST

START_TEST(test_greedy_256)
{
    llama *m = load_model();
    double ref[300];
    size_t n = read_numbers("greedy_bos_256.ids", ref, 300);
    ck_assert_uint_eq(n, 257);
    float logits[512];
    int tok = 1;
    for (uint32_t pos = 0; pos < 256; pos++) {
        ck_assert_int_eq((int)ref[pos], tok);
        ck_assert_int_eq(llama_forward(m, tok, pos, NULL, logits), MS_OK);
        tok = (int)llama_argmaxf(logits, 512);
        ck_assert_msg(tok == (int)ref[pos + 1], "step %u: got %d, reference %d", pos, tok,
                      (int)ref[pos + 1]);
    }
    llama_free(m);
}
END_TEST

static void check_encode(const llama_tok *t, const char *text, const int *want, int n_want)
{
    int ids[64];
    int n = llama_tok_encode(t, text, ids, 64);
    ck_assert_int_eq(n, n_want);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ids[i] == want[i], "'%s' token %d: %d != %d", text, i, ids[i], want[i]);
}

START_TEST(test_tokenizer)
{
    llama *m = load_model();
    llama_tok *t = load_tok(m);
    check_encode(t, "Once upon a time", (const int[]){1, 403, 407, 261, 378}, 5);
    check_encode(t, "Lily and Ben went to the park",
                 (const int[]){1, 317, 269, 368, 302, 263, 377, 267, 265, 282, 295, 433}, 12);
    check_encode(t, "", (const int[]){1}, 1);
    /* a code point with no piece falls back to its UTF-8 bytes (byte + 3) */
    int ids[16];
    int n = llama_tok_encode(t, "\xc3\xb6", ids, 16); /* U+00F6 has no piece */
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ids[2], 0xc3 + 3);
    ck_assert_int_eq(ids[3], 0xb6 + 3);
    ck_assert_int_eq(llama_tok_encode(t, "\xc3\xa9", ids, 16), 3); /* U+00E9 has one */
    /* decoding: the space after BOS is dropped, byte pieces become raw bytes */
    ck_assert_str_eq(llama_tok_piece(t, 1, 403), "Once");
    ck_assert_str_eq(llama_tok_piece(t, 403, 407), " upon");
    ck_assert_str_eq(llama_tok_piece(t, 5, 13), "\n");
    /* the decoded greedy continuation is the reference text */
    double ref[300];
    size_t nr = read_numbers("greedy_bos_256.ids", ref, 300);
    char path[1024], want[2048], got[2048] = "";
    snprintf(path, sizeof path, "%s/models/stories260K/reference/greedy_bos_256.txt", th_data());
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t wl = fread(want, 1, sizeof want - 1, f);
    fclose(f);
    want[wl] = '\0';
    for (size_t i = 1; i < nr; i++)
        strncat(got, llama_tok_piece(t, (int)ref[i - 1], (int)ref[i]),
                sizeof got - strlen(got) - 1);
    strncat(got, "\n", sizeof got - strlen(got) - 1);
    ck_assert_str_eq(got, want);
    llama_tok_free(t);
    llama_free(m);
}
END_TEST

typedef struct hook_ctx {
    int calls;
    double max_row_err;
    uint32_t keep_only_self;
} hook_ctx;

static void on_layer(void *ctx, const llama_layer_view *v)
{
    hook_ctx *c = ctx;
    c->calls++;
    for (uint32_t h = 0; h < 8; h++) {
        double s = 0;
        for (uint32_t t = 0; t <= v->pos; t++)
            s += v->att[h * (v->pos + 1) + t];
        c->max_row_err = fmax(c->max_row_err, fabs(s - 1));
    }
}

static int attend_mask(void *ctx, uint32_t layer, uint32_t kv_head, uint32_t pos, uint8_t *mask)
{
    hook_ctx *c = ctx;
    if (!c->keep_only_self)
        return 0;
    memset(mask, 0, pos + 1);
    return 1;
}

START_TEST(test_hooks)
{
    llama *m = load_model();
    hook_ctx c = {0};
    llama_hooks h = {.ctx = &c, .on_layer = on_layer, .attend_mask = attend_mask};
    float full[512], hooked[512], self_only[512];
    int toks[4] = {1, 403, 407, 261};
    for (uint32_t p = 0; p < 4; p++)
        llama_forward(m, toks[p], p, NULL, full);
    llama_reset(m);
    for (uint32_t p = 0; p < 4; p++)
        llama_forward(m, toks[p], p, &h, hooked);
    ck_assert_int_eq(c.calls, 4 * 5);
    ck_assert(c.max_row_err < 1e-5);
    ck_assert(memcmp(full, hooked, sizeof full) == 0);
    llama_reset(m);
    c.keep_only_self = 1;
    for (uint32_t p = 0; p < 4; p++)
        llama_forward(m, toks[p], p, &h, self_only);
    ck_assert(memcmp(full, self_only, sizeof full) != 0);
    uint32_t r, cl;
    const float *wo = llama_weight(m, "L2.wo", &r, &cl);
    ck_assert_ptr_nonnull(wo);
    ck_assert_uint_eq(r, 64);
    ck_assert_uint_eq(cl, 64);
    ck_assert_ptr_eq(llama_weight(m, "L0.wo", NULL, NULL) + 2 * 64 * 64, wo);
    ck_assert_ptr_nonnull(llama_weight(m, "tok_emb", &r, &cl));
    ck_assert_uint_eq(r, 512);
    ck_assert_ptr_null(llama_weight(m, "L5.wo", NULL, NULL));
    ck_assert_ptr_null(llama_weight(m, "L1.nope", NULL, NULL));
    ck_assert_int_eq(llama_forward(m, 600, 0, NULL, full), MS_ERR_RANGE);
    llama_free(m);
}
END_TEST

START_TEST(test_bad_checkpoint)
{
    model_cfg cfg;
    errbuf e;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    char tok[1024];
    ck_assert_int_eq(model_file_path(cfg.tokenizer, tok, sizeof tok), 0);
    llama *m = NULL;
    /* the tokenizer file is no checkpoint */
    ck_assert_int_ne(llama_load(&cfg, tok, &m, &e), MS_OK);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(e.msg, "error:"));
    cfg.n_layers = 4;
    char w[1024];
    ck_assert_int_eq(model_file_path(cfg.weights, w, sizeof w), 0);
    ck_assert_int_eq(llama_load(&cfg, w, &m, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "n_layers"));
}
END_TEST

static void write_bytes(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* Hostile files: a tokenizer too small for llama2.c's byte fallback (ids byte + 3), and a
 * checkpoint whose header sizes multiply past 64 bits, both refused with a clear error. */
START_TEST(test_hostile_files)
{
    const char *dir = td.dir;
    char path[600];
    /* a well-formed 10-piece tokenizer: max_len, then (score, length, bytes) per piece */
    unsigned char tok[256];
    size_t n = 0;
    int32_t max_len = 1;
    memcpy(tok, &max_len, 4);
    n = 4;
    for (int i = 0; i < 10; i++) {
        float score = (float)i;
        int32_t len = 1;
        memcpy(tok + n, &score, 4);
        memcpy(tok + n + 4, &len, 4);
        tok[n + 8] = (unsigned char)('a' + i);
        n += 9;
    }
    snprintf(path, sizeof path, "%s/tok10.bin", dir);
    write_bytes(path, tok, n);
    llama_tok *t = NULL;
    errbuf e;
    ck_assert_int_eq(llama_tok_load(path, 10, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(e.msg, "tok10.bin: error: a llama2.c tokenizer needs at "
                                        "least 259 pieces"));
    /* a checkpoint header whose tensors (2^20 layers of 2^30 x 2^30) overflow 64 bits */
    model_cfg cfg;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    cfg.n_layers = 1u << 20;
    cfg.dim = cfg.ffn_dim = 1u << 30;
    cfg.n_heads = cfg.n_kv_heads = 1u << 15;
    cfg.head_dim = 1u << 15;
    cfg.max_ctx = 1u << 30;
    int32_t hdr[7 + 4] = {
        (int32_t)cfg.dim,        (int32_t)cfg.ffn_dim,
        (int32_t)cfg.n_layers,   (int32_t)cfg.n_heads,
        (int32_t)cfg.n_kv_heads, cfg.tied_embeddings ? (int32_t)cfg.vocab : -(int32_t)cfg.vocab,
        (int32_t)cfg.max_ctx};
    snprintf(path, sizeof path, "%s/huge.bin", dir);
    write_bytes(path, hdr, sizeof hdr);
    llama *m = NULL;
    ck_assert_int_eq(llama_load(&cfg, path, &m, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(e.msg, "huge.bin: error: checkpoint too short for tensor"));
    /* heads × head_dim that wraps 32 bits to the dim */
    cfg.n_layers = 1;
    cfg.n_heads = 1u << 17;
    cfg.head_dim = 1u << 16; /* 2^33 ≡ 0 mod 2^32 */
    cfg.dim = 0;
    ck_assert_int_eq(llama_load(&cfg, path, &m, &e), MS_ERR_INPUT);
    /* a tied checkpoint whose seq_len (2^30) its freq_cis tables do not back: refused before
     * a 2^30-position KV cache is allocated (a fuzzer's find) */
    static uint8_t ck[8192];
    size_t len;
    char *src = th_slurp(th_data_path("tests/fuzz/corpus/checkpoint/tiny-tied.bin"), &len);
    ck_assert_uint_le(len, sizeof ck);
    memcpy(ck, src, len);
    free(src);
    int32_t h7[7];
    memcpy(h7, ck, sizeof h7);
    model_cfg tiny = cfg;
    tiny.dim = (uint32_t)h7[0], tiny.ffn_dim = (uint32_t)h7[1], tiny.n_layers = (uint32_t)h7[2];
    tiny.n_heads = (uint32_t)h7[3], tiny.n_kv_heads = (uint32_t)h7[4];
    tiny.vocab = (uint32_t)h7[5], tiny.max_ctx = (uint32_t)h7[6];
    tiny.head_dim = tiny.dim / tiny.n_heads;
    tiny.tied_embeddings = 1;
    snprintf(path, sizeof path, "%s/tied.bin", dir);
    write_bytes(path, ck, len);
    ck_assert_msg(llama_load(&tiny, path, &m, &e) == MS_OK, "%s", e.msg);
    llama_free(m);
    m = NULL;
    tiny.max_ctx = 1u << 30;
    int32_t big = 1 << 30;
    memcpy(ck + 24, &big, 4);
    write_bytes(path, ck, len);
    ck_assert_int_eq(llama_load(&tiny, path, &m, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "freq_cis tables of seq_len 1073741824"));
}
END_TEST

Suite *llama_suite(void)
{
    Suite *s = suite_create("llama");
    TCase *tc = th_case(s, "reference", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_logits_bos, test_greedy_256, test_tokenizer, test_hooks, test_bad_checkpoint,
             test_hostile_files);
    return s;
}

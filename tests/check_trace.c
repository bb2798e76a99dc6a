/* check_trace.c — trace directories (recorded, NumPy-written), the CLI, the synthetic
 * generator's determinism and knobs, and fitting. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "harness.h"
#include "models/llama.h"
#include "sim/trace/trace.h"
#include "sim/trace/synth_impl.h"
#include "sim/trace/synth_kern.h"

TESTDIR("check_trace")

/* Every attention row of the current position equals trace_attend over all keys. */
static double att_vs_attend(trace *t, uint32_t layer)
{
    const trace_shape *s = trace_get_shape(t);
    uint32_t pos = trace_pos(t), n = pos + 1;
    uint32_t *idx = malloc(n * sizeof *idx);
    float *p = malloc(n * sizeof *p);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    const float *att = trace_att(t, layer);
    double worst = 0;
    for (uint32_t h = 0; h < s->n_heads; h++) {
        ck_assert_int_eq(
            trace_attend(t, layer, h, trace_q(t, layer) + h * s->head_dim, idx, n, p, NULL), MS_OK);
        for (uint32_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(p[i] - att[h * n + i]));
    }
    free(idx);
    free(p);
    return worst;
}

/* ---- recorded traces ------------------------------------------------------------------ */

START_TEST(test_record_and_numpy)
{
    char text[1024], cmd[2048], out[4096];
    const char *dir = td.dir;
    snprintf(text, sizeof text, "%s/tests/data/tinystories_sample.txt", th_data());
    errbuf e;
    ck_assert_msg(trace_record("stories260K", text, 48, dir, &e) == MS_OK, "%s", e.msg);
    /* NumPy reads it back: shapes, rows sum to 1, softmax(q·k/√d) reproduces att */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py verify %s "
             "--tol 1e-5",
             th_data(), dir);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    trace *t = NULL;
    ck_assert_msg(trace_open(dir, &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *s = trace_get_shape(t);
    ck_assert_uint_eq(s->n_tokens, 48);
    ck_assert_uint_eq(s->n_layers, 5);
    ck_assert_uint_eq(s->n_kv_heads, 4);
    ck_assert(!trace_is_synthetic(t));
    for (int a = 0; a < TRACE_N_ARRAYS; a++)
        ck_assert(trace_has(t, (trace_array)a));
    /* the recorded values are the float reference's */
    model_cfg cfg;
    char wpath[1024];
    llama *m = NULL;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    ck_assert_int_eq(model_file_path(cfg.weights, wpath, sizeof wpath), 0);
    ck_assert_int_eq(llama_load(&cfg, wpath, &m, &e), MS_OK);
    const int32_t *ids = trace_tokens(t);
    ck_assert_int_eq(ids[0], 1);
    /* the ids are the first 48 of the whole text's encoding */
    char tpath[1024];
    llama_tok *tok = NULL;
    ck_assert_int_eq(model_file_path(cfg.tokenizer, tpath, sizeof tpath), 0);
    ck_assert_int_eq(llama_tok_load(tpath, 512, &tok, &e), MS_OK);
    FILE *tf = fopen(text, "rb");
    ck_assert_ptr_nonnull(tf);
    char *all = calloc(1, 1 << 16);
    size_t tn = fread(all, 1, (1 << 16) - 1, tf);
    fclose(tf);
    all[tn] = '\0';
    int *full = malloc((tn + 3) * sizeof *full);
    ck_assert_int_gt(llama_tok_encode(tok, all, full, (int)tn + 3), 48);
    for (int i = 0; i < 48; i++)
        ck_assert_int_eq(ids[i], full[i]);
    free(full);
    free(all);
    llama_tok_free(tok);
    float logits[512];
    for (uint32_t p = 0; p < 48; p++) {
        ck_assert_int_eq(llama_forward(m, ids[p], p, NULL, logits), MS_OK);
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        ck_assert(memcmp(logits, trace_logits(t), sizeof logits) == 0);
        if (p % 7 == 0)
            for (uint32_t l = 0; l < 5; l++)
                ck_assert_msg(att_vs_attend(t, l) < 1e-5, "pos %u layer %u", p, l);
    }
    uint32_t r, c;
    const float *wo = trace_wo(t, 3, &r, &c);
    ck_assert_uint_eq(r, 64);
    ck_assert(memcmp(wo, llama_weight(m, "L3.wo", NULL, NULL), 64 * 64 * sizeof(float)) == 0);
    /* backward seeks are random access for recorded traces */
    ck_assert_int_eq(trace_seek(t, 2, &e), MS_OK);
    ck_assert_int_eq(trace_pos(t), 2);
    ck_assert_int_eq(trace_seek(t, 48, &e), MS_ERR_RANGE);
    llama_free(m);
    trace_close(t);
}
END_TEST

START_TEST(test_cli_record_info)
{
    char out[8192];
    th_cli_expect(out, sizeof out, 0, NULL,
                  "trace record --model stories260K --text %s/tests/data/tinystories_sample.txt "
                  "--max-tokens 32 -o %s/tr",
                  th_data(), td.dir);
    th_cli_expect(out, sizeof out, 0, "format:     mpcsim-trace 1", "trace info %s/tr", td.dir);
    ck_assert_ptr_nonnull(strstr(out, "model:      stories260K"));
    ck_assert_ptr_nonnull(strstr(out, "layers 5, heads 8, kv_heads 4, head_dim 8"));
    ck_assert_ptr_nonnull(strstr(out, "tokens:     32"));
    ck_assert_ptr_nonnull(strstr(out, "arrays:     q k v att ffn logits wo tokens"));
    ck_assert_ptr_nonnull(strstr(out, "first ids:  1 410 13 "));
    /* fit needs more tokens than 32 and says so */
    th_cli_expect(out, sizeof out, 2, "too short", "trace fit %s/tr", td.dir);
    th_cli_expect(out, sizeof out, 2, "did you mean 'info'", "trace infoo %s/tr", td.dir);
}
END_TEST

/* A trace folder is read and written without following a link planted in it, and a FIFO or
 * device in place of a file is refused, never waited on. */
START_TEST(test_planted_links_and_fifo)
{
    char out[8192], path[600], victim[600];
    const char *dir = td.dir;
    snprintf(victim, sizeof victim, "%s/victim", dir);
    th_write(victim, "keep me\n");
    /* record into a folder where q.npy is a link to another file */
    snprintf(path, sizeof path, "%s/tr", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/tr/q.npy", dir);
    ck_assert_int_eq(symlink(victim, path), 0);
    th_cli_expect(out, sizeof out, 1, "a symbolic link, which is not followed",
                  "trace record --model stories260K --text %s/tests/data/tinystories_sample.txt "
                  "--max-tokens 8 -o %s/tr",
                  th_data(), dir);
    ck_assert_str_eq(th_text(victim), "keep me\n");
    /* the output folder itself a link */
    char link[600];
    snprintf(link, sizeof link, "%s/trlink", dir);
    snprintf(path, sizeof path, "%s/elsewhere", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(symlink(path, link), 0);
    th_cli_expect(out, sizeof out, 1, "not a directory",
                  "trace record --model stories260K --text %s/tests/data/tinystories_sample.txt "
                  "--max-tokens 8 -o %s",
                  th_data(), link);
    snprintf(path, sizeof path, "%s/elsewhere/manifest.yaml", dir);
    ck_assert(!th_exists(path));
    /* a good trace, then its manifest a link, a FIFO, a device */
    th_cli_expect(out, sizeof out, 0, NULL,
                  "trace record --model stories260K --text %s/tests/data/tinystories_sample.txt "
                  "--max-tokens 8 -o %s/good",
                  th_data(), dir);
    snprintf(path, sizeof path, "%s/good/manifest.yaml", dir);
    char moved[600];
    snprintf(moved, sizeof moved, "%s/manifest.copy", dir);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(symlink(moved, path), 0);
    th_cli_expect(out, sizeof out, 2, "a symbolic link, which is not followed",
                  "trace info %s/good", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "timeout 20 '%s' trace info %s/good", th_bin(), dir);
    int st = th_sh(cmd, out, sizeof out);
    ck_assert_msg(st == 2 && strstr(out, "manifest.yaml: error: cannot open (not a regular file)"),
                  "trace info on a FIFO: exit %d: %s", st, out);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink("/dev/zero", path), 0);
    th_cli_expect(out, sizeof out, 2, NULL, "trace info %s/good", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rename(moved, path), 0);
    th_cli_expect(out, sizeof out, 0, "tokens:     8", "trace info %s/good", dir);
}
END_TEST

/* A fixture written by the same NumPy writer scripts/dump_trace.py uses. */
START_TEST(test_numpy_fixture)
{
    char cmd[2048], out[4096];
    const char *dir = td.dir;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py fixture %s/fx "
             "--tokens 20 --seed 3",
             th_data(), dir);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    /* one value checked against NumPy directly: q[1][5][2][3] */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as n; "
             "print('%%.9g' %% n.load('%s/fx/q.npy')[1,5,2,3])\"",
             dir);
    ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
    double want = strtod(out, NULL);
    char fx[600];
    snprintf(fx, sizeof fx, "%s/fx", dir);
    trace *t = NULL;
    errbuf e;
    ck_assert_msg(trace_open(fx, &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *s = trace_get_shape(t);
    ck_assert_uint_eq(s->n_tokens, 20);
    ck_assert_uint_eq(s->n_heads, 4);
    ck_assert_uint_eq(s->n_kv_heads, 2);
    ck_assert_uint_eq(s->dim, 32);
    ck_assert_str_eq(trace_model_name(t), "fixture");
    ck_assert_int_eq(trace_seek(t, 5, &e), MS_OK);
    ck_assert_double_eq_tol(trace_q(t, 1)[2 * 8 + 3], want, 1e-6);
    /* the same trace without att.npy: rows are recomputed from q·k and agree */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py fixture %s/na "
             "--tokens 20 --seed 3 --no-att",
             th_data(), dir);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    snprintf(fx, sizeof fx, "%s/na", dir);
    trace *na = NULL;
    ck_assert_msg(trace_open(fx, &na, &e) == MS_OK, "%s", e.msg);
    ck_assert(!trace_has(na, TRACE_ATT));
    for (uint32_t p = 0; p < 20; p++) {
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        ck_assert_int_eq(trace_seek(na, p, &e), MS_OK);
        for (uint32_t l = 0; l < 2; l++) {
            ck_assert_msg(att_vs_attend(t, l) < 1e-5, "pos %u layer %u", p, l);
            const float *a = trace_att(t, l), *b = trace_att(na, l);
            for (uint32_t i = 0; i < 4 * (p + 1); i++)
                ck_assert_double_eq_tol(a[i], b[i], 1e-5);
        }
    }
    trace_close(na);
    trace_close(t);
    /* scripts/dump_trace.py imports its writer from the shared module; its Hugging Face
     * front end, without transformers, stops with a clear message (exit 1) */
    snprintf(cmd, sizeof cmd,
             "cd %s/scripts && /usr/bin/python3 -c \"import dump_trace, "
             "mpcsim_trace_io; assert dump_trace.TraceWriter is mpcsim_trace_io.TraceWriter\"",
             th_data());
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/dump_trace.py hf --model m --text "
             "%s/tests/data/tinystories_sample.txt -o %s/pt",
             th_data(), th_data(), dir);
    int st = th_sh(cmd, out, sizeof out);
    if (th_sh("/usr/bin/python3 -c 'import transformers'", NULL, 0) != 0) {
        ck_assert_msg(st == 1, "%d: %s", st, out);
        ck_assert_msg(strstr(out, "needs transformers") || strstr(out, "needs torch"), "%s", out);
    }
}
END_TEST

/* The trace in dir with its manifest good but from replaced by to (as long) is refused: no
 * trace, a message holding want and want2 (NULL: none). */
static void edited_refused(const char *dir, const char *good, const char *from, const char *to,
                           const char *want, const char *want2)
{
    char *bad = strdup(good);
    ck_assert_ptr_nonnull(bad);
    char *at = strstr(bad, from);
    ck_assert_msg(at && strlen(from) == strlen(to), "'%s' → '%s'", from, to);
    memcpy(at, to, strlen(to));
    char man[700];
    snprintf(man, sizeof man, "%s/manifest.yaml", dir);
    th_write(man, bad);
    free(bad);
    trace *t = NULL;
    errbuf e;
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(e.msg, want), "no '%s' in: %s", want, e.msg);
    ck_assert_msg(!want2 || strstr(e.msg, want2), "no '%s' in: %s", want2, e.msg);
}

START_TEST(test_bad_manifests)
{
    char cmd[2048], out[4096], man[700];
    const char *dir = td.dir;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py fixture %s",
             th_data(), dir);
    ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
    snprintf(man, sizeof man, "%s/manifest.yaml", dir);
    char *good = th_slurp(man, NULL);
    trace *t = NULL;
    errbuf e;
    /* a newer format version */
    edited_refused(dir, good, "mpcsim-trace 1", "mpcsim-trace 2",
                   "manifest.yaml:2:9: error: "
                   "trace format 'mpcsim-trace 2' is not supported",
                   "hint: regenerate");
    /* the CLI reports it and exits 2 */
    th_cli_expect(out, sizeof out, 2, "regenerate", "trace info %s", dir);
    /* no format line at all */
    th_write(man, strstr(good, "model:"));
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "not an mpcsim trace manifest"));
    /* the manifest disagrees with the arrays */
    edited_refused(dir, good, "n_tokens: 24", "n_tokens: 25",
                   "q.npy: error: array has shape (2,24,4,8)", "regenerate");
    /* a non-number */
    edited_refused(dir, good, "n_heads: 4", "n_heads: x", "'n_heads' must be an integer, not 'x'",
                   NULL);
    /* a float64 array */
    th_write(man, good);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as n; "
             "n.save('%s/v.npy', n.load('%s/v.npy').astype(n.float64))\"",
             dir, dir);
    ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "v.npy: error: .npy dtype must be"));
    /* no directory */
    ck_assert_int_eq(trace_open("/nonexistent/trace", &t, &e), MS_ERR_NOTFOUND);
    free(good);
}
END_TEST

START_TEST(test_npy_header)
{
    trace_npy h = {.dtype = 'f', .ndim = 3, .shape = {2, 3, 5}}, r;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(trace_npy_write_header(f, &h), MS_OK);
    fclose(f);
    ck_assert_uint_eq(len % 64, 0);
    f = fmemopen(buf, len, "r");
    errbuf e;
    ck_assert_int_eq(trace_npy_read_header(f, "mem", &r, &e), MS_OK);
    fclose(f);
    ck_assert_uint_eq(r.ndim, 3);
    ck_assert_uint_eq(r.shape[2], 5);
    ck_assert_uint_eq(r.data_offset, len);
    ck_assert_uint_eq(trace_npy_count(&r), 30);
    free(buf);
    const char junk[] = "not a numpy file at all";
    f = fmemopen((void *)junk, sizeof junk, "r");
    ck_assert_int_eq(trace_npy_read_header(f, "junk.npy", &r, &e), MS_ERR_FORMAT);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(e.msg, "junk.npy: error: not a .npy file"));
}
END_TEST

/* Writes a .npy file by hand: a version-1.0 header holding dict, padded with spaces so that
 * the data starts at data_off, then data_bytes zero bytes. */
static void write_npy_raw(const char *path, const char *dict, size_t data_off, size_t data_bytes)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    size_t hlen = data_off - 10, n = strlen(dict);
    ck_assert_uint_ge(hlen, n + 1);
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, 10, f);
    fputs(dict, f);
    for (size_t i = n; i + 1 < hlen; i++)
        fputc(' ', f);
    fputc('\n', f);
    for (size_t i = 0; i < data_bytes; i++)
        fputc(0, f);
    fclose(f);
}

/* Hostile .npy headers: a shape whose byte size wraps 64 bits must not pass the size check
 * (a 128-byte file claiming 2^62 floats), a data offset NumPy never writes is refused, and
 * negative or out-of-range dims are refused. */
START_TEST(test_npy_hostile)
{
    char path[700], out[4096];
    const char *dir = td.dir;
    snprintf(path, sizeof path, "%s/manifest.yaml", dir);
    th_write(path, "format: mpcsim-trace 1\nmodel: hostile\nn_layers: 1\nn_heads: 1\n"
                   "n_kv_heads: 1\nhead_dim: 2147483648\nn_tokens: 2147483648\n"
                   "arrays: {q: {}, k: {}, v: {}}\n");
    const char *big = "{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (1, 2147483648, 1, 2147483648), }";
    const char *names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, names[i]);
        write_npy_raw(path, big, 128, 0);
    }
    trace *t = NULL;
    errbuf e;
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(e.msg, "q.npy: error: .npy shape's size overflows 64 bits"));
    th_cli_expect(out, sizeof out, 2, "overflows 64 bits", "trace info %s", dir);
    /* a size that fits 64 bits but not the file: truncated */
    snprintf(path, sizeof path, "%s/manifest.yaml", dir);
    th_write(path, "format: mpcsim-trace 1\nmodel: hostile\nn_layers: 1\nn_heads: 1\n"
                   "n_kv_heads: 1\nhead_dim: 4\nn_tokens: 1073741824\n"
                   "arrays: {q: {}, k: {}, v: {}}\n");
    const char *mid = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1073741824, 1, 4), }";
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, names[i]);
        write_npy_raw(path, mid, 128, 0);
    }
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "q.npy: error: file is truncated"));
    /* a data offset of 134: the floats would sit misaligned in the map */
    snprintf(path, sizeof path, "%s/manifest.yaml", dir);
    th_write(path, "format: mpcsim-trace 1\nmodel: hostile\nn_layers: 1\nn_heads: 1\n"
                   "n_kv_heads: 1\nhead_dim: 4\nn_tokens: 2\narrays: {q: {}, k: {}, v: {}}\n");
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1, 4), }";
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, names[i]);
        write_npy_raw(path, ok, i == 0 ? 134 : 128, 32);
    }
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "q.npy: error: .npy data offset 134 is not a multiple"));
    snprintf(path, sizeof path, "%s/q.npy", dir);
    write_npy_raw(path, ok, 128, 32);
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_OK); /* the same arrays, aligned, open */
    trace_close(t);
    t = NULL;
    /* a negative dim and one past 64 bits */
    write_npy_raw(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, -2, 1, 4), }", 128,
                  32);
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad .npy shape"));
    write_npy_raw(path,
                  "{'descr': '<f4', 'fortran_order': False, "
                  "'shape': (1, 99999999999999999999999, 1, 4), }",
                  128, 32);
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad .npy shape"));
}
END_TEST

/* ---- synthetic traces ----------------------------------------------------------------- */

static model_cfg toy_cfg(uint32_t head_dim)
{
    model_cfg c;
    model_cfg_init(&c);
    snprintf(c.name, sizeof c.name, "toy");
    c.family = FAM_LLAMA;
    c.n_layers = 4;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = head_dim;
    c.dim = 4 * head_dim;
    c.ffn_dim = 64;
    c.max_ctx = 4096;
    return c;
}

static trace *synth(uint32_t d, uint32_t T, uint64_t seed, const trace_synth *p)
{
    model_cfg c = toy_cfg(d);
    trace *t = NULL;
    errbuf e;
    ck_assert_msg(trace_open_synth(&c, T, seed, p, &t, &e) == MS_OK, "%s", e.msg);
    return t;
}

/* Hash of every value a replay can read, over positions 0..T-1. */
static uint64_t digest(trace *t)
{
    const trace_shape *s = trace_get_shape(t);
    uint64_t h = 1469598103934665603ull;
    float kv[2 * 64 * 4];
    errbuf e;
#define MIX(ptr, n)                                             \
    do {                                                        \
        const unsigned char *b_ = (const unsigned char *)(ptr); \
        for (size_t i_ = 0; i_ < (n); i_++)                     \
            h = (h ^ b_[i_]) * 1099511628211ull;                \
    } while (0)
    for (uint32_t p = 0; p < s->n_tokens; p++) {
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        for (uint32_t l = 0; l < s->n_layers; l++) {
            MIX(trace_q(t, l), s->n_heads * s->head_dim * sizeof(float));
            MIX(trace_att(t, l), s->n_heads * (p + 1) * sizeof(float));
            MIX(trace_ffn(t, l), s->ffn_dim * sizeof(float));
            trace_kv(t, l, p, kv, kv + s->n_kv_heads * s->head_dim);
            MIX(kv, 2 * s->n_kv_heads * s->head_dim * sizeof(float));
        }
    }
    MIX(trace_wo(t, 1, NULL, NULL), s->dim * s->n_heads * s->head_dim * sizeof(float));
#undef MIX
    return h;
}

START_TEST(test_synth_deterministic)
{
    trace_synth p;
    trace_synth_defaults(&p);
    trace *a = synth(16, 64, 7, &p), *b = synth(16, 64, 7, &p), *c = synth(16, 64, 8, &p);
    uint64_t ha = digest(a);
    ck_assert_uint_eq(ha, digest(b));
    ck_assert_uint_ne(ha, digest(c));
    /* replaying a synthetic trace from the start (backward seek) gives the same values */
    ck_assert_uint_eq(ha, digest(a));
    ck_assert_uint_eq(trace_seed(a), 7);
    /* W_o of a layer is the same whenever it is asked for */
    uint32_t wr, wc;
    const float *w1 = trace_wo(a, 1, &wr, &wc);
    ck_assert_uint_eq(wr, 64);
    ck_assert_uint_eq(wc, 64);
    float *keep = malloc(wr * wc * sizeof *keep);
    memcpy(keep, w1, wr * wc * sizeof *keep);
    ck_assert(memcmp(trace_wo(a, 2, NULL, NULL), keep, wr * wc * sizeof *keep) != 0);
    ck_assert(memcmp(trace_wo(a, 1, NULL, NULL), keep, wr * wc * sizeof *keep) == 0);
    free(keep);
    ck_assert(trace_is_synthetic(a));
    ck_assert_ptr_null(trace_tokens(a));
    ck_assert_ptr_null(trace_logits(a));
    /* attention rows (from the logit model) are softmax(q·k/√d) over the regenerated keys */
    errbuf e;
    for (uint32_t pos = 0; pos < 64; pos += 9) {
        ck_assert_int_eq(trace_seek(a, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            ck_assert_msg(att_vs_attend(a, l) < 1e-5, "pos %u layer %u", pos, l);
    }
    trace_close(a);
    trace_close(b);
    trace_close(c);
}
END_TEST

/* The default generator with n_sinks sinks and heavy_frac of the keys heavy. */
static trace_synth sinks_and_heavy(uint32_t n_sinks, double heavy_frac)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.n_sinks = n_sinks;
    p.heavy_frac = heavy_frac;
    return p;
}

/* The table kernel gives the reference kernel's rows up to float rounding, for content widths
 * of one byte (d = 16), one sign word (d = 128) and three words with a partial byte (d = 200),
 * and its exp stays within 2 float ulps of expf. */
START_TEST(test_synth_kernel_vs_reference)
{
    static const uint32_t dims[] = {16, 128, 200};
    trace_synth p = sinks_and_heavy(3, 0.2);
    errbuf e;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        uint32_t d = dims[di], T = 150;
        trace *t = synth(d, T, 21, &p);
        float *ref = malloc(4 * T * sizeof *ref);
        for (uint32_t pos = 0; pos < T; pos += 37) {
            ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
            for (uint32_t l = 0; l < 4; l++) {
                trace_synth_reference_kernel = 1;
                memcpy(ref, trace_att(t, l), 4 * (pos + 1) * sizeof *ref);
                trace_synth_reference_kernel = 0;
                const float *att = trace_att(t, l);
                for (uint32_t i = 0; i < 4 * (pos + 1); i++)
                    ck_assert_msg(fabsf(att[i] - ref[i]) <= 1e-6f + 2e-5f * ref[i],
                                  "d %u pos %u layer %u entry %u: %g vs %g", d, pos, l, i, att[i],
                                  ref[i]);
            }
        }
        free(ref);
        trace_close(t);
    }
    for (float x = -90.0f; x <= 0.0f; x += 0.0137f) {
        float a = trace_synth_exp_neg(x), b = expf(x);
        if (b < 1.17549435e-38f)
            ck_assert_float_eq(a, 0.0f);
        else
            ck_assert_msg(fabsf(a - b) <= 2 * (nextafterf(b, 1.0f) - b), "exp(%g)", x);
    }
    ck_assert_float_eq(trace_synth_exp_neg(0.0f), 1.0f);
}
END_TEST

/* The AVX-512 loops give the portable loops' values bit for bit (where the CPU has AVX-512;
 * elsewhere both runs take the portable loops): whole rows for content widths of one byte
 * (d = 16), one word (128), a word and a partial byte (130) and three words (200) at positions
 * whose rows end in every lane of a vector and past a block of keys, with those positions' keys
 * and values; then each loop alone over
 * lengths 1..300, with 1..3 words and partial last words, against its portable twin (the keys'
 * signs and the values too, of every length), and the
 * softmax against a double-precision one within float rounding (the exp's 2 ulps and the
 * float sums of up to 16 terms per lane). */
START_TEST(test_synth_kernel_wide_vs_portable)
{
    static const uint32_t dims[] = {16, 128, 130, 200};
    static const uint32_t poss[] = {0, 1, 14, 15, 16, 17, 63, 64, 255, 256, 257, 300};
    trace_synth p = sinks_and_heavy(2, 0.3);
    errbuf e;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        trace *t = synth(dims[di], 320, 5, &p);
        float *ref = malloc(4 * 320 * sizeof *ref);
        for (size_t pi = 0; pi < sizeof poss / sizeof poss[0]; pi++) {
            uint32_t pos = poss[pi], n = 4 * (pos + 1);
            ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
            for (uint32_t l = 0; l < 4; l += 3) {
                trace_synth_portable_kernel = 1;
                memcpy(ref, trace_att(t, l), n * sizeof *ref);
                trace_synth_portable_kernel = 0;
                ck_assert_msg(!memcmp(trace_att(t, l), ref, n * sizeof *ref),
                              "d %u pos %u layer %u", dims[di], pos, l);
            }
            /* keys and values (every KV head) */
            uint32_t kvn = trace_get_shape(t)->n_kv_heads * dims[di];
            float *kv = calloc(4 * kvn, sizeof *kv);
            trace_synth_portable_kernel = 1;
            ck_assert_int_eq(trace_kv(t, 2, pos, kv, kv + kvn), MS_OK);
            trace_synth_portable_kernel = 0;
            ck_assert_int_eq(trace_kv(t, 2, pos, kv + 2 * kvn, kv + 3 * kvn), MS_OK);
            ck_assert_msg(!memcmp(kv, kv + 2 * kvn, 2 * kvn * sizeof *kv), "kv d %u pos %u",
                          dims[di], pos);
            free(kv);
        }
        free(ref);
        trace_close(t);
    }
    /* the loops alone, on random words, tables and logits */
    enum { N = 300 };
    uint64_t *wa = calloc(3 * SYNTH_BLOCK, sizeof *wa), *wp = calloc(3 * SYNTH_BLOCK, sizeof *wp);
    float *nib = malloc(24 * 32 * sizeof *nib), *tab = malloc(24 * 256 * sizeof *tab);
    enum { NL = 17 * SYNTH_BLOCK };
    float *loc = malloc(NL * sizeof *loc), ra[SYNTH_BLOCK], rp[SYNTH_BLOCK];
    uint64_t hb[NL / 64];
    float *xa = malloc(N * sizeof *xa), *xp = malloc(N * sizeof *xp);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 9);
    for (uint32_t i = 0; i < 24 * 32; i++)
        nib[i] = (float)gsl_ran_gaussian(r, 0.3);
    for (uint32_t b = 0; b < 24; b++)
        for (uint32_t v = 0; v < 256; v++)
            tab[b * 256 + v] = nib[32 * b + 16 + (v >> 4)] + nib[32 * b + (v & 15)];
    for (uint32_t j = 0; j < NL; j++)
        loc[j] = (float)gsl_ran_gaussian(r, 2.0);
    for (uint32_t w = 0; w < NL / 64; w++)
        hb[w] = (uint64_t)gsl_rng_get(r) << 32 ^ gsl_rng_get(r);
    for (uint32_t nj = 1; nj <= SYNTH_BLOCK; nj += nj < 40 ? 1 : 23)
        for (uint32_t nb = 1; nb <= 24; nb += nb < 9 ? 1 : 7) {
            /* keys from j0 (a multiple of 16), sinks up to inside the block or none */
            uint32_t nw = (nb + 7) / 8, j0 = 16 * (nj % 17);
            synth_base bs = {loc, hb, 1.5f, 4.0f, nj % 3 ? j0 + nj % 37 : 0};
            trace_synth_portable_kernel = 1;
            synth_kern_words(0x1234567890abcdefull ^ nb, j0, nj, nw, SYNTH_BLOCK, wp);
            float mp = synth_kern_lookup(&bs, j0, wp, SYNTH_BLOCK, nj, nw, nb, nib, tab, rp);
            trace_synth_portable_kernel = 0;
            synth_kern_words(0x1234567890abcdefull ^ nb, j0, nj, nw, SYNTH_BLOCK, wa);
            float ma = synth_kern_lookup(&bs, j0, wa, SYNTH_BLOCK, nj, nw, nb, nib, tab, ra),
                  mx = rp[0];
            for (uint32_t j = 1; j < nj; j++)
                mx = rp[j] > mx ? rp[j] : mx;
            for (uint32_t k = 0; k < nw; k++)
                ck_assert_msg(!memcmp(wa + k * SYNTH_BLOCK, wp + k * SYNTH_BLOCK, nj * sizeof *wa),
                              "words nj %u nw %u", nj, nw);
            ck_assert_msg(!memcmp(ra, rp, nj * sizeof *ra), "lookup nj %u nb %u", nj, nb);
            ck_assert_msg(ma == mx && mp == mx, "lookup max nj %u nb %u", nj, nb);
        }
    for (uint32_t n = 1; n <= N; n++) {                 /* signs and values of n channels */
        uint64_t st = 0x9e3779b97f4a7c15ull * n, w[12]; /* (N + 63) / 64 words, stride 2 */
        for (uint32_t i = 0; i < 12; i++)
            w[i] = st * (2 * i + 1) ^ st >> (i + 3);
        trace_synth_portable_kernel = 1;
        synth_kern_signs(w + 1, 2, n, 0.75f, xp);
        trace_synth_portable_kernel = 0;
        synth_kern_signs(w + 1, 2, n, 0.75f, xa);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "signs n %u", n);
        trace_synth_portable_kernel = 1;
        synth_kern_values(st, n, 1.0f / 37837.0f, xp);
        trace_synth_portable_kernel = 0;
        synth_kern_values(st, n, 1.0f / 37837.0f, xa);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "values n %u", n);
    }
    for (uint32_t n = 1; n <= N; n++) {
        for (uint32_t j = 0; j < n; j++)
            xa[j] = xp[j] = (float)gsl_ran_gaussian(r, 8.0);
        double mx = xp[0], sum = 0;
        for (uint32_t j = 1; j < n; j++)
            mx = xp[j] > mx ? xp[j] : mx;
        for (uint32_t j = 0; j < n; j++)
            sum += exp(xp[j] - mx);
        float x7 = xp[n / 2];
        trace_synth_portable_kernel = 1;
        synth_kern_softmax(xp, n);
        trace_synth_portable_kernel = 0;
        synth_kern_softmax(xa, n);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "softmax n %u", n);
        double want = exp(x7 - mx) / sum;
        ck_assert_msg(fabs(xp[n / 2] - want) <= 4e-6 * want + 1e-30, "softmax n %u: %g vs %g", n,
                      xp[n / 2], want);
    }
    gsl_rng_free(r);
    free(wa);
    free(wp);
    free(nib);
    free(tab);
    free(loc);
    free(xa);
    free(xp);
}
END_TEST

/* The sign-word cache (trace_keep_key_words, trace_synth_words_cap) changes no value: rows and keys
 * of a trace that keeps every key's words equal those of one that hashes them again per row, bit
 * for bit, at positions that fill the cache forward, then below what it holds, then past it; under
 * both kernels. */
START_TEST(test_synth_words_cache)
{
    static const uint32_t dims[] = {16, 128, 200};
    static const uint32_t poss[] = {40, 3, 17, 299, 120, 300};
    trace_synth p;
    trace_synth_defaults(&p);
    p.heavy_frac = 0.2;
    errbuf e;
    size_t cap = trace_synth_words_cap;
    for (int portable = 0; portable < 2; portable++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            uint32_t d = dims[di];
            trace_synth_portable_kernel = portable;
            trace_synth_words_cap = 0;
            trace *u = synth(d, 320, 5, &p);
            trace_keep_key_words(u);
            trace_synth_words_cap = cap;
            trace *c = synth(d, 320, 5, &p);
            ck_assert_uint_eq(trace_synth_words_bytes(c), 0); /* until asked for */
            trace_keep_key_words(c);
            ck_assert_uint_eq(trace_synth_words_bytes(u), 0);
            ck_assert_uint_gt(trace_synth_words_bytes(c), 0);
            uint32_t kvn = trace_get_shape(c)->n_kv_heads * d;
            float *ka = calloc(2 * kvn, sizeof *ka), *kb = calloc(2 * kvn, sizeof *kb);
            for (size_t pi = 0; pi < sizeof poss / sizeof poss[0]; pi++) {
                uint32_t pos = poss[pi], n = 4 * (pos + 1);
                ck_assert_int_eq(trace_seek(u, pos, &e), MS_OK);
                ck_assert_int_eq(trace_seek(c, pos, &e), MS_OK);
                for (uint32_t l = 0; l < 4; l += 3)
                    ck_assert_msg(!memcmp(trace_att(u, l), trace_att(c, l), n * sizeof(float)),
                                  "rows d %u pos %u layer %u", d, pos, l);
                /* keys below, at and past what the cache holds */
                for (uint32_t j = 0; j < 320; j += 7) {
                    ck_assert_int_eq(trace_kv(u, 3, j, ka, ka + kvn), MS_OK);
                    ck_assert_int_eq(trace_kv(c, 3, j, kb, kb + kvn), MS_OK);
                    ck_assert_msg(!memcmp(ka, kb, 2 * kvn * sizeof *ka), "kv d %u key %u", d, j);
                }
            }
            free(ka);
            free(kb);
            trace_close(u);
            trace_close(c);
        }
    trace_synth_portable_kernel = 0;
}
END_TEST

/* A key's heavy status does not depend on the order the layers are read in (a layer's bitmap
 * reuses the filled bitmap of the layer below): layers read upward, downward and from a
 * position in the middle give the same heavy channel of every key. */
START_TEST(test_synth_heavy_order)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.heavy_frac = 0.3;
    p.layer_sim = 0.6;
    const uint32_t T = 200, d = 16, L = 4, Hkv = 2;
    float k[2 * 16], *got[3];
    for (int v = 0; v < 3; v++) {
        trace *t = synth(d, T, 17, &p);
        got[v] = malloc((size_t)L * T * Hkv * sizeof **got);
        if (v == 2) /* fill layers 3 and 1 halfway first */
            for (uint32_t l = 3; l < 4; l -= 2)
                ck_assert_int_eq(trace_kv(t, l, T / 2, k, NULL), MS_OK);
        for (uint32_t i = 0; i < L; i++) {
            uint32_t l = v == 1 ? L - 1 - i : i;
            for (uint32_t j = 0; j < T; j++) {
                ck_assert_int_eq(trace_kv(t, l, j, k, NULL), MS_OK);
                for (uint32_t g = 0; g < Hkv; g++)
                    got[v][((size_t)l * T + j) * Hkv + g] = k[g * d + 1];
            }
        }
        trace_close(t);
    }
    size_t n = (size_t)L * T * Hkv, heavy = 0;
    for (size_t i = 0; i < n; i++)
        heavy += got[0][i] != 0;
    ck_assert(heavy > n / 10 && heavy < n / 2);
    ck_assert(!memcmp(got[0], got[1], n * sizeof **got));
    ck_assert(!memcmp(got[0], got[2], n * sizeof **got));
    for (int v = 0; v < 3; v++)
        free(got[v]);
}
END_TEST

/* A span's rows (trace_span_att) are the rows of its positions one at a time, bit for bit, and
 * its queries theirs: spans of 1..TRACE_SPAN_MAX positions crossing a block of keys, with and
 * without the sign-word cache, under both kernels. */
START_TEST(test_synth_span)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.n_sinks = 2;
    p.heavy_frac = 0.2;
    errbuf e;
    size_t cap = trace_synth_words_cap;
    for (int v = 0; v < 4; v++) {
        trace_synth_portable_kernel = v & 1;
        trace_synth_words_cap = v & 2 ? 0 : cap;
        uint32_t d = v < 2 ? 128 : 200, T = 400;
        trace *a = synth(d, T, 5, &p), *b = synth(d, T, 5, &p);
        trace_keep_key_words(a);
        const trace_shape *sh = trace_get_shape(a);
        ck_assert_uint_eq(trace_span_max(a), TRACE_SPAN_MAX);
        for (uint32_t cnt = 1, p0 = 250; cnt <= TRACE_SPAN_MAX; p0 += 3 * cnt, cnt++) {
            ck_assert_int_eq(trace_span_begin(a, p0, cnt, &e), MS_OK);
            ck_assert_uint_eq(trace_pos(a), p0 + cnt - 1);
            uint32_t G = sh->n_heads / sh->n_kv_heads;
            for (uint32_t l = 0; l < sh->n_layers; l += 3)
                for (uint32_t g = 0; g < sh->n_kv_heads; g++)
                    for (uint32_t i = 0; i < cnt; i++) {
                        size_t n = p0 + i + 1;
                        const float *row = trace_span_att(a, l, g, i) + g * G * n;
                        const float *q = trace_span_q(a, l, i);
                        ck_assert_int_eq(trace_seek(b, p0 + i, &e), MS_OK);
                        ck_assert_msg(
                            !memcmp(row, trace_att(b, l) + g * G * n, G * n * sizeof *row),
                            "v %d span %u+%u layer %u head %u", v, p0, i, l, g);
                        ck_assert(!memcmp(q, trace_q(b, l), sh->n_heads * d * sizeof *q));
                    }
            ck_assert_ptr_null(trace_span_att(a, 0, 0, cnt));
        }
        trace_close(a);
        trace_close(b);
    }
    trace_synth_portable_kernel = 0;
    trace_synth_words_cap = cap;
}
END_TEST

/* Generator 2 reaches any position directly (forward, backward, far jumps) with the values a
 * forward walk gives; generator 1 is the sequential mt19937 AR(1) stream of earlier builds,
 * value for value; both have the drift the parameters ask for. */
START_TEST(test_synth_random_access)
{
    trace_synth p;
    trace_synth_defaults(&p);
    ck_assert_uint_eq(p.generator, 2);
    const uint32_t T = 300, d = 32, nq = 4 * 4 * d;
    trace *t = synth(d, T, 13, &p), *u = synth(d, T, 13, &p);
    float *walk = malloc((size_t)T * nq * sizeof *walk);
    errbuf e;
    for (uint32_t pos = 0; pos < T; pos++) {
        ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            memcpy(walk + ((size_t)pos * 4 + l) * 4 * d, trace_q(t, l), 4 * d * sizeof *walk);
    }
    static const uint32_t jumps[] = {299, 0, 150, 149, 151, 7, 298, 64, 63, 65, 128, 1, 255};
    for (size_t i = 0; i < sizeof jumps / sizeof jumps[0]; i++) {
        ck_assert_int_eq(trace_seek(u, jumps[i], &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            ck_assert_msg(!memcmp(trace_q(u, l), walk + ((size_t)jumps[i] * 4 + l) * 4 * d,
                                  4 * d * sizeof *walk),
                          "position %u", jumps[i]);
    }
    /* generator 1: c_0 = ε_0, c_t = ρ c_{t−1} + √(1−ρ²) ε_t over one mt19937 seeded by seed */
    trace_synth p1 = p;
    p1.generator = 1;
    p1.group_sim = 0; /* the streams as drawn, before the GQA mix */
    trace *o = synth(d, T, 13, &p1);
    uint32_t m = (d - 2) / 4, dc = d - 2 - 2 * m;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 13);
    double c0[16 * 32], c1[16 * 32], q0[16 * 32], q1[16 * 32];
    for (uint32_t i = 0; i < 16 * dc; i++)
        c0[i] = gsl_ran_gaussian_ziggurat(r, 1.0);
    for (uint32_t i = 0; i < 16 * dc; i++)
        c1[i] = gsl_ran_gaussian_ziggurat(r, 1.0);
    gsl_rng_free(r);
    for (uint32_t pos = 0; pos < 2; pos++) {
        ck_assert_int_eq(trace_seek(o, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            for (uint32_t h = 0; h < 4; h++)
                for (uint32_t i = 0; i < dc; i++)
                    (pos ? q1 : q0)[(l * 4 + h) * dc + i] = trace_q(o, l)[h * d + 2 + 2 * m + i];
    }
    for (uint32_t i = 0; i < 16 * dc; i++)
        ck_assert_float_eq((float)q0[i], (float)c0[i]);
    /* position 1 is α·c_0 + β·ε_1 with α² + β² = 1 (least squares over every channel) */
    double s00 = 0, s01 = 0, s11 = 0, y0 = 0, y1 = 0;
    for (uint32_t i = 0; i < 16 * dc; i++) {
        s00 += c0[i] * c0[i];
        s01 += c0[i] * c1[i];
        s11 += c1[i] * c1[i];
        y0 += c0[i] * q1[i];
        y1 += c1[i] * q1[i];
    }
    double det = s00 * s11 - s01 * s01, al = (y0 * s11 - y1 * s01) / det,
           be = (y1 * s00 - y0 * s01) / det;
    ck_assert_double_eq_tol(al * al + be * be, 1.0, 1e-5);
    for (uint32_t i = 0; i < 16 * dc; i++)
        ck_assert_double_eq_tol(q1[i], al * c0[i] + be * c1[i], 1e-5);
    /* the drift the parameters ask for, whichever generator (same sampling noise) */
    trace_stats a, b;
    ck_assert_int_eq(trace_measure(t, &p, &a, &e), MS_OK);
    ck_assert_int_eq(trace_measure(o, &p1, &b, &e), MS_OK);
    ck_assert_msg(fabs(a.q_cos - b.q_cos) < 0.01, "q_cos %g vs %g", a.q_cos, b.q_cos);
    ck_assert_msg(fabs(a.q_cos - (1 - p.drift)) < 0.03, "q_cos %g", a.q_cos);
    free(walk);
    trace_close(t);
    trace_close(u);
    trace_close(o);
}
END_TEST

START_TEST(test_synth_subset_attend)
{
    trace_synth p;
    trace_synth_defaults(&p);
    trace *t = synth(32, 100, 3, &p);
    errbuf e;
    ck_assert_int_eq(trace_seek(t, 80, &e), MS_OK);
    const float *att = trace_att(t, 1);
    float row[81];
    memcpy(row, att + 3 * 81, sizeof row); /* head 3 */
    uint32_t idx[] = {0, 5, 17, 60, 78, 80};
    float pr[6], out[32], k[6 * 32], v[6 * 32], kk[2 * 32], vv[2 * 32];
    ck_assert_int_eq(trace_attend(t, 1, 3, trace_q(t, 1) + 3 * 32, idx, 6, pr, out), MS_OK);
    double sum = 0;
    for (int i = 0; i < 6; i++)
        sum += row[idx[i]];
    /* restricting the softmax renormalizes the full row over the subset */
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(pr[i], row[idx[i]] / sum, 1e-5);
    /* the output is Σ p v over the gathered values (query head 3 reads KV head 1) */
    ck_assert_int_eq(trace_gather(t, 1, 1, idx, 6, k, v), MS_OK);
    for (int j = 0; j < 32; j++) {
        double o = 0;
        for (int i = 0; i < 6; i++)
            o += pr[i] * v[i * 32 + j];
        ck_assert_double_eq_tol(out[j], o, 1e-5);
    }
    ck_assert_int_eq(trace_kv(t, 1, 17, kk, vv), MS_OK);
    ck_assert(memcmp(kk + 32, k + 2 * 32, 32 * sizeof(float)) == 0);
    ck_assert(memcmp(vv + 32, v + 2 * 32, 32 * sizeof(float)) == 0);
    uint32_t oob = 100;
    ck_assert_int_eq(trace_gather(t, 1, 1, &oob, 1, k, v), MS_ERR_RANGE);
    trace_close(t);
}
END_TEST

static trace_stats measure(const trace_synth *p, uint32_t T)
{
    trace *t = synth(64, T, 11, p);
    trace_stats st;
    errbuf e;
    ck_assert_msg(trace_measure(t, p, &st, &e) == MS_OK, "%s", e.msg);
    trace_close(t);
    return st;
}

START_TEST(test_synth_knobs)
{
    trace_synth base, p;
    trace_synth_defaults(&base);
    trace_stats s0 = measure(&base, 256);
    p = base;
    p.sink = 7;
    ck_assert(measure(&p, 256).sink_mass > 2 * s0.sink_mass);
    p = base;
    p.sink = 0;
    ck_assert(measure(&p, 256).sink_mass < 0.5 * s0.sink_mass);
    p = base;
    p.local = 6;
    ck_assert(measure(&p, 256).local_mass > s0.local_mass + 0.1);
    p = base;
    p.heavy = 6;
    ck_assert(measure(&p, 256).heavy_mass > s0.heavy_mass + 0.1);
    p = base;
    p.drift = 0.5;
    ck_assert(measure(&p, 256).q_cos < s0.q_cos - 0.2);
    p = base;
    p.layer_sim = 1;
    ck_assert(measure(&p, 256).layer_overlap > 0.95);
    p = base;
    p.ffn_sparsity = 0.9;
    ck_assert_double_eq_tol(measure(&p, 256).ffn_neg, 0.9, 0.01);
}
END_TEST

/* Fitting a synthetic trace recovers its parameters within the tolerances stated in
 * TRACE_FORMAT.md §Fitting. */
static void check_recovery(const trace_synth *p, uint32_t d, uint32_t T)
{
    trace *t = synth(d, T, 5, p);
    trace_synth f;
    trace_stats st;
    errbuf e;
    ck_assert_msg(trace_fit(t, p, &f, &st, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(f.sink, p->sink, 0.3);
    ck_assert_double_eq_tol(f.local, p->local, 0.3);
    ck_assert_double_eq_tol(f.window, p->window, 0.15 * p->window);
    ck_assert_double_eq_tol(f.heavy, p->heavy, 0.3);
    ck_assert_double_eq_tol(f.heavy_frac, p->heavy_frac, 0.015);
    ck_assert_double_eq_tol(f.layer_sim, p->layer_sim, 0.1);
    ck_assert_double_eq_tol(f.drift, p->drift, 0.03);
    ck_assert_double_eq_tol(f.noise, p->noise, 0.2);
    ck_assert_double_eq_tol(f.ffn_sparsity, p->ffn_sparsity, 0.01);
    ck_assert_uint_eq(f.n_sinks, p->n_sinks);
    trace_close(t);
}

START_TEST(test_fit_recovers)
{
    trace_synth p;
    trace_synth_defaults(&p);
    check_recovery(&p, 64, 512);
    p = (trace_synth){.sink = 6,
                      .n_sinks = 4,
                      .local = 1.5,
                      .window = 8,
                      .heavy = 4,
                      .heavy_frac = 0.1,
                      .layer_sim = 0.3,
                      .drift = 0.4,
                      .noise = 0.5,
                      .ffn_sparsity = 0.8,
                      .generator = 2};
    check_recovery(&p, 64, 512);
    p = (trace_synth){.sink = 2,
                      .n_sinks = 1,
                      .local = 4,
                      .window = 32,
                      .heavy = 2.5,
                      .heavy_frac = 0.03,
                      .layer_sim = 0.9,
                      .drift = 0.1,
                      .noise = 1.5,
                      .ffn_sparsity = 0.3,
                      .generator = 2};
    check_recovery(&p, 128, 768);
}
END_TEST

/* Grouped-query attention: the content queries of two query heads of one KV head correlate by
 * group_sim (pooled over positions, layers, groups and channels: within 0.05), `trace fit`
 * reads it back from the attention rows alone within 0.2 (its bias is upward: heavy hitters
 * widen the noise it divides by; TRACE_FORMAT.md §Grouped-query attention), and an MHA shape
 * is the same trace whatever group_sim says. */
static double group_corr(trace *t)
{
    const trace_shape *s = trace_get_shape(t);
    uint32_t G = s->n_heads / s->n_kv_heads, d = s->head_dim, m = (d - 2) / 4, c0 = 2 + 2 * m;
    double xy = 0, xx = 0, yy = 0;
    errbuf e;
    for (uint32_t p = 0; p < s->n_tokens; p++) {
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        for (uint32_t l = 0; l < s->n_layers; l++) {
            const float *q = trace_q(t, l);
            for (uint32_t h = 0; h + 1 < s->n_heads; h++)
                for (uint32_t i = c0; h % G != G - 1 && i < d; i++) {
                    double a = q[(size_t)h * d + i], b = q[(size_t)(h + 1) * d + i];
                    xy += a * b;
                    xx += a * a;
                    yy += b * b;
                }
        }
    }
    return xy / sqrt(xx * yy);
}

START_TEST(test_synth_gqa)
{
    static const double sims[] = {0, 0.3, 0.7};
    errbuf e;
    for (size_t i = 0; i < sizeof sims / sizeof sims[0]; i++) {
        trace_synth p, f;
        trace_synth_defaults(&p);
        p.group_sim = sims[i];
        trace *t = synth(64, 512, 5, &p);
        ck_assert_double_eq_tol(group_corr(t), sims[i], 0.05);
        trace_stats st;
        ck_assert_msg(trace_fit(t, &p, &f, &st, &e) == MS_OK, "%s", e.msg);
        ck_assert_double_eq_tol(f.group_sim, sims[i], 0.2);
        trace_close(t);
    }
    /* MHA: group_sim changes nothing, and fit keeps the default it cannot measure */
    model_cfg c = toy_cfg(16);
    c.n_kv_heads = c.n_heads;
    trace_synth p0, p1, f;
    trace_synth_defaults(&p0);
    p0.group_sim = 0;
    p1 = p0;
    p1.group_sim = 0.9;
    trace *a, *b;
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p0, &a, &e), MS_OK);
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &b, &e), MS_OK);
    ck_assert_uint_eq(digest(a), digest(b));
    trace_synth_defaults(&p0);
    ck_assert_msg(trace_fit(b, &p1, &f, NULL, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq(f.group_sim, p0.group_sim);
    trace_close(a);
    trace_close(b);
    /* GQA: it is a knob */
    c = toy_cfg(16);
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &a, &e), MS_OK);
    p1.group_sim = 0;
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &b, &e), MS_OK);
    ck_assert_uint_ne(digest(a), digest(b));
    trace_close(a);
    trace_close(b);
}
END_TEST

START_TEST(test_synth_params)
{
    trace_synth p;
    trace_synth_defaults(&p);
    errbuf e;
    ck_assert_int_eq(trace_synth_set(&p, "heavy_frac", "0.2", &e), MS_OK);
    ck_assert_double_eq(p.heavy_frac, 0.2);
    ck_assert_int_eq(trace_synth_set(&p, "n_sink", "3", &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "did you mean 'n_sinks'"));
    ck_assert_int_eq(trace_synth_set(&p, "drift", "1.5", &e), MS_ERR_RANGE);
    ck_assert_int_eq(trace_synth_set(&p, "n_sinks", "2.5", &e), MS_ERR_RANGE);
    kv_param kv[2] = {{"window", "8", 4, 5}, {"hevy", "2", 5, 5}};
    ck_assert_int_eq(trace_synth_from_kv(&p, kv, 2, "s.yaml", &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "s.yaml:5:5: error: unknown synthetic trace parameter "
                                        "'hevy' (did you mean 'heavy'?)"));
    ck_assert_double_eq(p.window, 8);
    /* YAML round trip */
    char path[600];
    const char *dir = td.dir;
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    FILE *f = fopen(path, "w");
    trace_synth_write_yaml(&p, f);
    fclose(f);
    trace_synth q;
    trace_synth_defaults(&q);
    ck_assert_msg(trace_synth_read_yaml(&q, path, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(q.heavy_frac, 0.2, 1e-9);
    ck_assert_double_eq_tol(q.window, 8, 1e-9);
    th_write(path, "sink: 2\nwindw: 3\n");
    ck_assert_int_eq(trace_synth_read_yaml(&q, path, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "p.yaml:2:1: error: unknown"));
}
END_TEST

/* `trace synth -o` writes a directory that NumPy verifies and trace_open reads back equal. */
START_TEST(test_cli_synth_roundtrip)
{
    char cmd[2048], out[8192];
    const char *dir = td.dir;
    th_cli_expect(out, sizeof out, 0, NULL,
                  "trace synth --model stories260K --tokens 40 --seed 9 --set sink=5 -o %s/syn",
                  dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py verify %s/syn",
             th_data(), dir);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    char syn[600];
    snprintf(syn, sizeof syn, "%s/syn/manifest.yaml", dir);
    char *man = th_slurp(syn, NULL);
    ck_assert_ptr_nonnull(strstr(man, "\nsource: synth\n"));
    ck_assert_ptr_nonnull(strstr(man, "\nseed: 9\n"));
    ck_assert_ptr_nonnull(strstr(man, "\nsynth: {sink: 5, n_sinks: 1, local: 3,"));
    free(man);
    snprintf(syn, sizeof syn, "%s/syn", dir);
    trace *r = NULL, *g = NULL;
    errbuf e;
    ck_assert_msg(trace_open(syn, &r, &e) == MS_OK, "%s", e.msg);
    model_cfg cfg;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    trace_synth p;
    trace_synth_defaults(&p);
    p.sink = 5;
    ck_assert_int_eq(trace_open_synth(&cfg, 40, 9, &p, &g, &e), MS_OK);
    ck_assert_int_eq(trace_seek(r, 39, &e), MS_OK);
    ck_assert_int_eq(trace_seek(g, 39, &e), MS_OK);
    ck_assert(memcmp(trace_q(r, 4), trace_q(g, 4), 64 * sizeof(float)) == 0);
    ck_assert(memcmp(trace_att(r, 4), trace_att(g, 4), 8 * 40 * sizeof(float)) == 0);
    trace_close(r);
    trace_close(g);
    /* --stats streams without writing */
    th_cli_expect(out, sizeof out, 0, "sink_mass:",
                  "trace synth --model llama-2-7b --tokens 64 --stats --set window=4");
    th_cli_expect(out, sizeof out, 2, "did you mean 'heavy'",
                  "trace synth --model stories260K --tokens 10 --stats --set hevy=2");
}
END_TEST

/* fit → params.yaml → synth --params: a fitted parameter file drives the generator */
START_TEST(test_cli_fit_workflow)
{
    char out[8192];
    th_cli_expect(
        out, sizeof out, 0, NULL,
        "trace synth --model stories260K --tokens 160 --seed 3 --set heavy_frac=0.1 --set "
        "window=4 -o %s/s",
        td.dir);
    th_cli_expect(out, sizeof out, 0, "sink_mass:", "trace fit %s/s -o %s/p.yaml", td.dir, td.dir);
    ck_assert_ptr_nonnull(strstr(out, "heavy_frac:"));
    char path[600];
    snprintf(path, sizeof path, "%s/p.yaml", td.dir);
    trace_synth p;
    trace_synth_defaults(&p);
    errbuf e;
    ck_assert_msg(trace_synth_read_yaml(&p, path, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(p.ffn_sparsity, 0.5, 0.02);
    th_cli_expect(out, sizeof out, 0, "# synthetic llama-2-7b, 64 tokens",
                  "trace synth --model llama-2-7b --tokens 64 --params %s --stats", path);
}
END_TEST

START_TEST(test_open_run)
{
    run_cfg rc;
    memset(&rc, 0, sizeof rc);
    errbuf e;
    ck_assert_int_eq(model_load("stories260K", &rc.model, &e), MS_OK);
    snprintf(rc.model_ref, sizeof rc.model_ref, "stories260K");
    rc.work.prompt_len = 24;
    rc.work.decode_len = 8;
    rc.seed = 4;
    trace *t = NULL;
    ck_assert_int_eq(trace_open_run(&rc, &t, &e), MS_ERR_NOTFOUND);
    snprintf(rc.trace.source, sizeof rc.trace.source, "synth");
    rc.trace.n_params = 1;
    rc.trace.params[0] = (kv_param){"sink", "1.5", 3, 7};
    ck_assert_msg(trace_open_run(&rc, &t, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(trace_get_shape(t)->n_tokens, 32);
    ck_assert_double_eq(trace_synth_params(t)->sink, 1.5);
    trace_close(t);
    snprintf(rc.trace.source, sizeof rc.trace.source, "record");
    snprintf(rc.trace.path, sizeof rc.trace.path, "%s/tests/data/tinystories_sample.txt",
             th_data());
    ck_assert_msg(trace_open_run(&rc, &t, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(trace_get_shape(t)->n_tokens, 32);
    ck_assert_int_eq(trace_seek(t, 31, &e), MS_OK);
    ck_assert_ptr_nonnull(trace_logits(t));
    ck_assert(att_vs_attend(t, 0) < 1e-5);
    trace_close(t);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = th_case(s, "recorded", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_record_and_numpy, test_cli_record_info, test_numpy_fixture,
             test_bad_manifests, test_npy_header, test_npy_hostile, test_open_run,
             test_planted_links_and_fifo);
    tc = th_case(s, "synthetic", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_synth_deterministic, test_synth_subset_attend, test_synth_kernel_vs_reference,
             test_synth_kernel_wide_vs_portable, test_synth_words_cache, test_synth_span,
             test_synth_heavy_order, test_synth_random_access, test_synth_knobs, test_fit_recovers,
             test_synth_gqa, test_synth_params, test_cli_synth_roundtrip, test_cli_fit_workflow);
    return s;
}

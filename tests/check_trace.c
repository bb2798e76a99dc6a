/* check_trace.c — trace directories (recorded, NumPy-written), their CLI and readers; the
 * synthetic generator is tested in check_synth.c. */
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
#include "traceck.h"
#include "models/llama.h"
#include "sim/trace/trace.h"
#include "sim/trace/synth_impl.h"
#include "sim/trace/synth_kern.h"

TESTDIR("check_trace")

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
                ck_assert_msg(th_att_vs_attend(t, l) < 1e-5, "pos %u layer %u", p, l);
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
            ck_assert_msg(th_att_vs_attend(t, l) < 1e-5, "pos %u layer %u", p, l);
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
    ck_assert(th_att_vs_attend(t, 0) < 1e-5);
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
    return s;
}

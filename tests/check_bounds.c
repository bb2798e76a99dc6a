/* check_bounds.c — readers of whole files take only regular files of a bounded size: a
 * llama2.c checkpoint and tokenizer, the text a trace is recorded from, a scenario file, and the
 * PEM files of a key folder, a serve replay file and the files a node under --shape leaves its
 * launcher refuse /dev/zero and an oversized (sparse) file at once, with an error naming the
 * file, instead of reading until memory runs out. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "models/llama.h"
#include "protocols/backend/mpc_tls.h"
#include "sim/scenario/scn.h"
#include "sim/secure/netshape.h"
#include "sim/serve/workload.h"
#include "sim/trace/trace.h"
#include "harness.h"

TESTDIR("check_bounds")

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A sparse file of size bytes (no blocks written); its path. */
static const char *sparse(const char *name, off_t size)
{
    const char *p = testdir_path(&td, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, size), 0);
    close(fd);
    return p;
}

/* The checkpoint and tokenizer readers. Before: /dev/zero was "cannot read file" by chance
 * (its size reads as 0), and a sparse 9 GiB checkpoint was allocated and read whole. */
START_TEST(test_llama_files)
{
    model_cfg cfg;
    errbuf e;
    ck_assert_msg(model_load("stories260K", &cfg, &e) == MS_OK, "%s", e.msg);
    llama *m = NULL;
    double t0 = now_s();
    ck_assert_int_eq(llama_load(&cfg, "/dev/zero", &m, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: not a regular file"), "%s", e.msg);
    const char *big = sparse("big.bin", (off_t)(LLAMA_CKPT_MAX + 4096));
    ck_assert_int_eq(llama_load(&cfg, big, &m, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "big.bin: error: file of 8589938688 bytes, larger than the "
                                "8589934592 bytes this reader takes"),
                  "%s", e.msg);
    llama_tok *t = NULL;
    ck_assert_int_eq(llama_tok_load("/dev/zero", cfg.vocab, &t, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "not a regular file"), "%s", e.msg);
    const char *tb = sparse("tok.bin", (off_t)(LLAMA_TOK_FILE_MAX + 1));
    ck_assert_int_eq(llama_tok_load(tb, cfg.vocab, &t, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "larger than the 67108864 bytes"), "%s", e.msg);
    ck_assert_msg(now_s() - t0 < 2.0, "took %.2f s", now_s() - t0);
}
END_TEST

/* The text a trace is recorded from, and a scenario file. Before: the text was cut at 64 MiB
 * without a word (and /dev/zero read as an empty text); a scenario file was read until memory
 * ran out. */
START_TEST(test_text_files)
{
    model_cfg cfg;
    errbuf e;
    ck_assert_msg(model_load("stories260K", &cfg, &e) == MS_OK, "%s", e.msg);
    uint32_t n = 0;
    ck_assert_int_eq(trace_count_tokens(&cfg, "/dev/zero", 64, &n, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: text larger than 64 MiB"), "%s", e.msg);
    const char *big = sparse("big.txt", (off_t)(65 << 20));
    ck_assert_int_eq(trace_count_tokens(&cfg, big, 64, &n, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "big.txt: error: text larger than 64 MiB"), "%s", e.msg);
    scenario s;
    ck_assert_int_ne(scn_load("/dev/zero", NULL, &s, &e), MS_OK);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: scenario file larger than 64 MiB"), "%s", e.msg);
}
END_TEST

/* A key folder whose ca.pem is /dev/zero (a link to it) or a 2 MiB file: refused before
 * OpenSSL reads it. Before: handed to OpenSSL, which failed on it ("no certificate or crl
 * found"), the cause unsaid. */
START_TEST(test_pem_files)
{
    const char *k = testdir_path(&td, "k");
    errbuf e;
    ck_assert_msg(mpc_tls_make_keys(k, 2, &e) == MS_OK, "%s", e.msg);
    char ca[600];
    snprintf(ca, sizeof ca, "%s/ca.pem", k);
    ck_assert_int_eq(unlink(ca), 0);
    ck_assert_int_eq(symlink("/dev/zero", ca), 0);
    mpc_tls *t = NULL;
    ck_assert_int_eq(mpc_tls_load(k, 0, &t, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "ca.pem: the session CA is not a regular file"), "%s", e.msg);
    ck_assert_int_eq(unlink(ca), 0);
    const char *big = sparse("k/ca.pem", 2 << 20);
    ck_assert_int_eq(chmod(big, 0644), 0);
    ck_assert_int_eq(mpc_tls_load(k, 0, &t, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "ca.pem: the session CA is larger than 1 MiB"), "%s", e.msg);
}
END_TEST

/* A serve replay file (serve --workload FILE): /dev/zero, a FIFO and a sparse file past 4 GiB
 * refused by wl_load at once; a stream of zeros handed to wl_read stops at its 64 MiB line bound.
 * Before: wl_load waited on the FIFO for ever and read the others until memory ran out. */
START_TEST(test_workload_files)
{
    workload w;
    wl_init(&w);
    errbuf e;
    double t0 = now_s();
    ck_assert_int_eq(wl_load(&w, "/dev/zero", &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: not a regular file"), "%s", e.msg);
    const char *fifo = testdir_path(&td, "wl.fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(wl_load(&w, fifo, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "wl.fifo: error: not a regular file"), "%s", e.msg);
    const char *big = sparse("big.wl", (off_t)(4ull << 30) + 1);
    ck_assert_int_eq(wl_load(&w, big, &e), MS_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "big.wl: error: file of 4294967297 bytes, larger than the "
                                "4294967296 bytes this reader takes"),
                  "%s", e.msg);
    FILE *z = fopen("/dev/zero", "rb");
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(wl_read(&w, z, "zero.wl", &e), MS_ERR_FORMAT);
    fclose(z);
    ck_assert_msg(strstr(e.msg, "zero.wl:1:1: error: line longer than 64 MiB"), "%s", e.msg);
    ck_assert_int_eq((int)w.n, 0);
    wl_free(&w);
    ck_assert_msg(now_s() - t0 < 10.0, "took %.2f s",
                  now_s() - t0); /* 64 MiB read; a loaded host */
}
END_TEST

/* The files a node under --shape leaves for the launcher (its report, its output): a symbolic
 * link, /dev/zero, a FIFO and a file past the bound are refused; a file within it is read
 * whole. Before: read with fopen, following links and without a bound. */
START_TEST(test_netshape_files)
{
    uint8_t *b = NULL;
    size_t n = 0;
    errbuf e;
    const char *ok = testdir_path(&td, "out.bin");
    FILE *f = fopen(ok, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("0123456789", f);
    fclose(f);
    ck_assert_int_eq(netshape_read_file(ok, 10, &b, &n, &e), MS_OK);
    ck_assert_int_eq((int)n, 10);
    ck_assert_str_eq((char *)b, "0123456789");
    free(b);
    ck_assert_int_eq(netshape_read_file(ok, 9, &b, &n, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "out.bin: error: file of 10 bytes, larger than the 9 bytes"), "%s",
                  e.msg);
    ck_assert_ptr_null(b);
    const char *link = testdir_path(&td, "link.bin");
    ck_assert_int_eq(symlink(ok, link), 0);
    ck_assert_int_eq(netshape_read_file(link, 1 << 20, &b, &n, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "link.bin: cannot open: a symbolic link, which is not followed"),
                  "%s", e.msg);
    ck_assert_int_eq(netshape_read_file("/dev/zero", NETSHAPE_OUT_MAX, &b, &n, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: not a regular file"), "%s", e.msg);
    const char *fifo = testdir_path(&td, "out.fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(netshape_read_file(fifo, NETSHAPE_OUT_MAX, &b, &n, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "out.fifo: error: not a regular file"), "%s", e.msg);
    const char *big = sparse("big.out", (off_t)NETSHAPE_OUT_MAX + 1);
    ck_assert_int_eq(netshape_read_file(big, NETSHAPE_OUT_MAX, &b, &n, &e), MS_ERR_IO);
    ck_assert_msg(strstr(e.msg, "larger than the 1073741824 bytes"), "%s", e.msg);
}
END_TEST

Suite *bounds_suite(void)
{
    Suite *s = suite_create("bounds");
    TCase *tc = th_case(s, "readers", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_llama_files, test_text_files, test_pem_files, test_workload_files,
             test_netshape_files);
    return s;
}

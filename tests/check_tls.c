/* check_tls.c — the backend's TLS 1.3 channels and its waits: loopback sessions run TLS by
 * default with the payload counters of a plaintext session and exactly the record framing the
 * cost model charges; key folders; a peer with another session's key or another node's
 * certificate is refused, naming it; a peer of the previous frame version gets a version error;
 * and the dealer's backpressure and the goodbye give up after --timeout-ms. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocols/backend/mpc_local.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/backend/mpc_tls.h"
#include "sim/engine/net.h"
#include "sim/scenario/scn.h"
#include "harness.h"
#include "mpcfix.h"

TESTDIR("check_tls")

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- framing on the wire */

/* Message sizes around the record boundary: a frame of 32 + len bytes is one record up to
 * 16384, two from 16385. */
static const size_t sizes[] = {1, 8, 16352, 16353, 40000, 100000};
#define N_SIZES (sizeof sizes / sizeof *sizes)

typedef struct wire_out {
    int tls;
    mpc_net_stats a, b; /* around the rounds */
} wire_out;

/* P0 and P1 exchange one message of every size each way, one round each; the dealer idles. */
static int wire_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)e, (void)arg;
    wire_out w = {.tls = mpc_net_is_tls(net), .a = *mpc_net_get_stats(net)};
    int self = mpc_net_self(net);
    static uint8_t sbuf[100000], rbuf[100000];
    for (size_t k = 0; k < N_SIZES && self < 2; k++) {
        const void *snd[MPC_NODES_MAX] = {0};
        void *rcv[MPC_NODES_MAX] = {0};
        size_t sl[MPC_NODES_MAX] = {0}, rl[MPC_NODES_MAX] = {0};
        snd[!self] = sbuf, sl[!self] = sizes[k];
        rcv[!self] = rbuf, rl[!self] = sizes[k];
        int rc = mpc_net_round(net, snd, sl, rcv, rl, 0, err);
        if (rc)
            return rc;
    }
    w.b = *mpc_net_get_stats(net);
    fwrite(&w, sizeof w, 1, out);
    return MS_OK;
}

static void run_wire(int plaintext, wire_out w[3])
{
    mpc_launch l = {.cfg = mpcfix_cfg("semi2k"), .deadline_ms = 30000, .plaintext = plaintext};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    ck_assert_msg(mpc_launch_run(&l, wire_node, NULL, nr, &nodes, &e) == MS_OK, "%s", e.msg);
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc == MS_OK, "node %d: %s", i, nr[i].err);
        ck_assert_uint_eq(nr[i].out_len, sizeof w[i]);
        memcpy(&w[i], nr[i].out, sizeof w[i]);
        if (!plaintext) /* two connections (data, heartbeat) to each of the two other nodes */
            ck_assert_int_eq(nr[i].st.tls_conns, 4);
        ck_assert(plaintext ? nr[i].st.tls_hs_sent == 0 : nr[i].st.tls_hs_sent > 0);
    }
    mpc_node_results_free(nr, nodes);
}

/* TLS is on by default; rounds and payload bytes are those of a plaintext session; the bytes
 * on the wire are the frames plus MPC_TLS_OVERHEAD per record of at most MPC_TLS_RECORD
 * plaintext bytes, as net_wire_stream_bytes (the cost model) charges, and no more. */
START_TEST(test_tls_default_and_framing)
{
    wire_out t[3], p[3];
    run_wire(0, t);
    run_wire(1, p);
    net_wire tw = {
        .msg_bytes = MPC_FRAME_HDR, .tls_record = MPC_TLS_RECORD, .tls_overhead = MPC_TLS_OVERHEAD};
    net_wire pw = {.msg_bytes = MPC_FRAME_HDR};
    uint64_t want_t = 0, want_p = 0;
    for (size_t k = 0; k < N_SIZES; k++) {
        uint64_t m = sizes[k] + MPC_FRAME_HDR;
        want_t +=
            m + (m + MPC_TLS_RECORD - 1) / MPC_TLS_RECORD * MPC_TLS_OVERHEAD; /* RFC 8446 §5.2 */
        want_p += m;
        ck_assert_uint_eq(net_wire_stream_bytes(&tw, sizes[k]),
                          m + (m + MPC_TLS_RECORD - 1) / MPC_TLS_RECORD * 22);
        ck_assert_uint_eq(net_wire_stream_bytes(&pw, sizes[k]), m);
    }
    ck_assert_uint_eq(net_wire_stream_bytes(&tw, 0), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(t[i].tls && !p[i].tls, "node %d: TLS %d by default, %d with plaintext", i,
                      t[i].tls, p[i].tls);
        int j = !i;
        ck_assert_uint_eq(t[i].b.rounds - t[i].a.rounds, N_SIZES);
        ck_assert_uint_eq(t[i].b.rounds - t[i].a.rounds, p[i].b.rounds - p[i].a.rounds);
        ck_assert_uint_eq(t[i].b.sent[j] - t[i].a.sent[j], p[i].b.sent[j] - p[i].a.sent[j]);
        ck_assert_uint_eq(t[i].b.recv[j] - t[i].a.recv[j], p[i].b.recv[j] - p[i].a.recv[j]);
        ck_assert_uint_eq(t[i].b.wire_sent[j] - t[i].a.wire_sent[j], want_t);
        ck_assert_uint_eq(t[i].b.wire_recv[j] - t[i].a.wire_recv[j], want_t);
        ck_assert_uint_eq(p[i].b.wire_sent[j] - p[i].a.wire_sent[j], want_p);
    }
}
END_TEST

/* ---------------------------------------------------------------- keys and handshakes */

/* The loopback launcher's keys never touch the disk: with $TMPDIR a file (no folder can be made
 * in it), a TLS session runs, every node authenticating its four connections. Before: the
 * launcher made a key folder in $TMPDIR for a moment, and failed here ("cannot make a folder
 * for the session's keys"). */
START_TEST(test_keys_in_memory)
{
    const char *f = testdir_path(&td, "not-a-folder");
    FILE *fp = fopen(f, "w");
    ck_assert_ptr_nonnull(fp);
    fclose(fp);
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", f, 1);
    mpc_launch l = {.cfg = mpcfix_cfg("semi2k"), .deadline_ms = 30000};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    int rc = mpc_launch_run(&l, wire_node, NULL, nr, &nodes, &e);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc == MS_OK, "node %d: %s", i, nr[i].err);
        ck_assert_int_eq(nr[i].st.tls_conns, 4);
    }
    mpc_node_results_free(nr, nodes);
}
END_TEST

START_TEST(test_key_folder)
{
    errbuf e;
    const char *k = testdir_path(&td, "k");
    ck_assert_msg(mpc_tls_make_keys(k, 3, &e) == MS_OK, "%s", e.msg);
    mpcfix_assert_keys(k, 3);
    char p[400];
    /* nothing is overwritten */
    ck_assert_int_eq(mpc_tls_make_keys(k, 3, &e), MS_ERR_IO);
    ck_assert_ptr_nonnull(strstr(e.msg, "already exists"));
    mpc_tls *t = NULL;
    ck_assert_msg(mpc_tls_load(k, 2, &t, &e) == MS_OK, "%s", e.msg);
    mpc_tls_free(t);
    /* a key others can read is refused; a certificate of another node too */
    snprintf(p, sizeof p, "%s/node1.key", k);
    ck_assert_int_eq(chmod(p, 0644), 0);
    ck_assert_int_eq(mpc_tls_load(k, 1, &t, &e), MS_ERR_IO);
    ck_assert_ptr_nonnull(strstr(e.msg, "readable by others"));
    ck_assert_int_eq(chmod(p, 0600), 0);
    char q[400];
    snprintf(p, sizeof p, "%s/node0.pem", k);
    snprintf(q, sizeof q, "%s/node1.pem", k);
    ck_assert_int_eq(rename(q, p), 0); /* node 0's certificate is now node 1's */
    ck_assert_int_eq(mpc_tls_load(k, 0, &t, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "is not node 0's certificate"), "%s", e.msg);
    ck_assert_int_eq(mpc_tls_load(k, 5, &t, &e), MS_ERR_IO);
}
END_TEST

/* One side of a handshake over a socketpair, in a thread. */
typedef struct hs_side {
    mpc_tls *t;
    int fd, server, expect;
    int rc;
    errbuf why;
} hs_side;

static void *hs_run(void *arg)
{
    hs_side *s = arg;
    mpc_tls_conn *c = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t deadline = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 3000000000ull;
    s->rc = mpc_tls_handshake(s->t, s->fd, s->server, s->expect,
                              s->server ? "the client" : "the server", deadline, &c, &s->why);
    if (!s->rc) { /* a record each way: the channel works */
        uint8_t b = 0x42;
        size_t n = 0;
        char why[200];
        int r;
        do
            r = s->server ? mpc_tls_read(c, &b, 1, &n, why, sizeof why)
                          : mpc_tls_write(c, &b, 1, &n, why, sizeof why);
        while (r == MPC_TLS_WANT_READ || r == MPC_TLS_WANT_WRITE);
        s->rc = r || b != 0x42 ? MS_ERR_PROTO : MS_OK;
    }
    mpc_tls_close(c);
    shutdown(s->fd, SHUT_RDWR); /* the other side sees the end at once */
    return NULL;
}

/* Node `cn` (loaded from folder cdir) dials; node `sn` (from sdir) accepts; each expects the
 * other to be node ce / se. */
static void handshake(const char *cdir, int cn, int ce, const char *sdir, int sn, int se,
                      hs_side *c, hs_side *s)
{
    int sv[2];
    errbuf e;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    *c = (hs_side){.fd = sv[0], .server = 0, .expect = ce};
    *s = (hs_side){.fd = sv[1], .server = 1, .expect = se};
    ck_assert_msg(mpc_tls_load(cdir, cn, &c->t, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(mpc_tls_load(sdir, sn, &s->t, &e) == MS_OK, "%s", e.msg);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, hs_run, s), 0);
    hs_run(c);
    pthread_join(th, NULL);
    mpc_tls_free(c->t);
    mpc_tls_free(s->t);
    close(sv[0]);
    close(sv[1]);
}

/* Mutual authentication: the right pair connects; another session's key is refused by both
 * ends; a node presenting another node's (valid) certificate is refused by name, whichever
 * end it is. */
START_TEST(test_handshakes)
{
    errbuf e;
    const char *a = testdir_path(&td, "a"), *b = testdir_path(&td, "b");
    ck_assert_int_eq(mpc_tls_make_keys(a, 3, &e), MS_OK);
    ck_assert_int_eq(mpc_tls_make_keys(b, 3, &e), MS_OK);
    hs_side c, s;
    handshake(a, 2, 0, a, 0, 2, &c, &s);
    ck_assert_msg(c.rc == MS_OK && s.rc == MS_OK, "client: %s | server: %s", c.why.msg, s.why.msg);
    /* the accepting node is from another session: the dialling one refuses it */
    handshake(a, 2, 0, b, 0, 2, &c, &s);
    ck_assert_int_ne(c.rc, MS_OK);
    ck_assert_int_ne(s.rc, MS_OK);
    ck_assert_msg(
        strstr(c.why.msg, "TLS handshake with the server failed: certificate verify failed"), "%s",
        c.why.msg);
    ck_assert_msg(strstr(s.why.msg, "the client refused this node's certificate"), "%s", s.why.msg);
    /* the dialling node trusts this session's CA but holds another session's key: refused by
     * the accepting one, and it learns so during the handshake */
    const char *m = testdir_path(&td, "m");
    ck_assert_int_eq(mkdir(m, 0700), 0);
    char from[400], to[400];
    const char *files[][2] = {{"ca.pem", NULL}, {"node2.pem", "b"}, {"node2.key", "b"}};
    for (int i = 0; i < 3; i++) {
        snprintf(from, sizeof from, "%s/%s", files[i][1] ? b : a, files[i][0]);
        snprintf(to, sizeof to, "%s/%s", m, files[i][0]);
        ck_assert_int_eq(link(from, to), 0);
    }
    handshake(m, 2, 0, a, 0, 2, &c, &s);
    ck_assert_int_ne(c.rc, MS_OK);
    ck_assert_int_ne(s.rc, MS_OK);
    ck_assert_msg(strstr(c.why.msg, "the server refused this node's certificate"), "%s", c.why.msg);
    ck_assert_msg(strstr(s.why.msg, "certificate verify failed"), "%s", s.why.msg);
    /* node 1 dials claiming to be node 2 (its hello said 2): the acceptor refuses it */
    handshake(a, 1, 0, a, 0, 2, &c, &s);
    ck_assert_int_ne(s.rc, MS_OK);
    ck_assert_msg(
        strstr(s.why.msg, "the peer taken for the client presented node 1's certificate: refused"),
        "%s", s.why.msg);
    ck_assert_int_ne(c.rc, MS_OK);
    ck_assert_msg(strstr(c.why.msg, "it did not accept this node's certificate"), "%s", c.why.msg);
    /* node 1 answers where node 0 was dialled */
    handshake(a, 2, 0, a, 1, 2, &c, &s);
    ck_assert_int_ne(c.rc, MS_OK);
    ck_assert_msg(
        strstr(c.why.msg, "the peer taken for the server presented node 1's certificate: refused"),
        "%s", c.why.msg);
}
END_TEST

/* A hello of the previous frame version gets a version error; one of the other security mode
 * says so. */
START_TEST(test_hello_versions)
{
    uint8_t h[MPC_FRAME_HDR] = {0};
    mpcfix_frame(h, 2, MPC_FR_HELLO, 2, MPC_HELLO_TLS, 3);
    int id, chan;
    errbuf e;
    ck_assert_int_eq(mpc_net_hello_parse(h, 3, 0, 1, &id, &chan, &e), MS_ERR_PROTO);
    ck_assert_msg(strstr(e.msg, "frame version 2, this build 5"), "%s", e.msg);
    mpcfix_frame(h, MPC_FRAME_VERSION, MPC_FR_HELLO, 2, MPC_HELLO_TLS, 3);
    ck_assert_int_eq(mpc_net_hello_parse(h, 3, 0, 1, &id, &chan, &e), MS_OK);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(chan, 0);
    ck_assert_int_eq(mpc_net_hello_parse(h, 3, 0, 0, &id, &chan, &e), MS_ERR_PROTO);
    ck_assert_msg(strstr(e.msg, "node 2 runs with TLS and this node with --insecure-plaintext"),
                  "%s", e.msg);
}
END_TEST

/* ---------------------------------------------------------------- waits and --timeout-ms */

typedef struct stall {
    int kind; /* 0: P1 stops reading the dealer's corrections; 1: P1 says goodbye late */
} stall;

static int stall_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)e, (void)out;
    const stall *s = arg;
    int self = mpc_net_self(net);
    size_t big = 64u << 20; /* far more than the socket buffers hold */
    if (s->kind == 0 && self == 2) {
        uint8_t *b = calloc(big, 1);
        int rc = b ? mpc_net_send_offline(net, 1, b, big, err) : MS_ERR_NOMEM;
        free(b);
        return rc;
    }
    if (self == 1 || (s->kind == 0 && self == 0))
        usleep(2500000); /* busy (its heartbeats go on): neither reads nor says goodbye */
    if (s->kind == 0 && self == 1) {
        uint8_t *b = calloc(big, 1);
        int rc = b ? mpc_net_recv_offline(net, 2, b, big, err) : MS_ERR_NOMEM;
        free(b);
        return rc;
    }
    return MS_OK;
}

/* The dealer blocked on a party that does not read, and a node waiting for a goodbye, give up
 * after --timeout-ms (1 s here), not after a fixed two minutes. */
START_TEST(test_waits_follow_timeout)
{
    for (int kind = 0; kind < 2; kind++) {
        stall s = {kind};
        mpc_launch l = {.cfg = mpcfix_cfg("semi2k"), .deadline_ms = 20000, .timeout_ms = 1000};
        mpc_node_result nr[MPC_NODES_MAX];
        int nodes;
        errbuf e;
        double t0 = now_s();
        ck_assert_msg(mpc_launch_run(&l, stall_node, &s, nr, &nodes, &e) == MS_OK, "%s", e.msg);
        /* the node that waits on P1 (the dealer, or P0 for its goodbye); on a loaded machine
         * another node waiting on P1 may time out first, and the launcher then stops the rest */
        int waiter = kind == 0 ? 2 : 0;
        for (int k = 0; k < nodes && nr[waiter].rc != MS_ERR_TIMEOUT; k++)
            if (k != 1 && nr[k].rc == MS_ERR_TIMEOUT)
                waiter = k;
        ck_assert_msg(nr[waiter].rc == MS_ERR_TIMEOUT, "kind %d: node %d: %s", kind, waiter,
                      nr[waiter].err);
        ck_assert_msg(strstr(nr[waiter].err, "no progress from P1 for 1000 ms"), "%s",
                      nr[waiter].err);
        ck_assert_msg(nr[waiter].seconds < 3.5, "kind %d: node %d waited %.2f s", kind, waiter,
                      nr[waiter].seconds);
        if (getenv("WAIT_TIMES"))
            fprintf(stderr, "%s: node %d ended %.2f s after the launch (%.2f s in all): %s\n",
                    kind ? "goodbye" : "backpressure", waiter, nr[waiter].seconds, now_s() - t0,
                    nr[waiter].err);
        mpc_node_results_free(nr, nodes);
    }
}
END_TEST

/* ---------------------------------------------------------------- the cost model's TLS framing */

/* A message's bytes on a TCP link carrying TLS 1.3, by hand: the stream is payload + frame
 * header + 22 bytes per record of at most 16384 (RFC 8446 §5.1, §5.2), then cut into 1448-byte
 * segments of 66 header bytes each (sim/engine/net.c, NET_WIRE_TCP). */
START_TEST(test_wire_tls_model)
{
    net_wire w = NET_WIRE_TCP;
    w.msg_bytes = 32;
    w.tls_record = NET_WIRE_TLS13_RECORD;
    w.tls_overhead = NET_WIRE_TLS13_OVERHEAD;
    errbuf e;
    ck_assert_int_eq(net_wire_check(&w, &e), MS_OK);
    /* 100000 + 32 = 100032 plaintext bytes: 7 records, 100186 stream bytes, 70 segments */
    ck_assert_uint_eq(net_wire_stream_bytes(&w, 100000), 100186);
    ck_assert_uint_eq(net_wire_segments(&w, 100000), 70);
    ck_assert_uint_eq(net_wire_bytes(&w, 100000, 0), 100186 + 70 * 66);
    /* 16352 + 32 is one full record; one byte more is two */
    ck_assert_uint_eq(net_wire_stream_bytes(&w, 16352), 16384 + 22);
    ck_assert_uint_eq(net_wire_stream_bytes(&w, 16353), 16385 + 44);
    net_wire bad = w;
    bad.tls_record = 0;
    ck_assert_int_eq(net_wire_check(&bad, &e), MS_ERR_INPUT);
    /* scenarios: wire: tls, its fields, and its canonical text loading back to the same */
    scenario sc;
    const char *text = "model: stories260K\nprotocol: semi2k\n"
                       "network: {latency_ms: 1, bandwidth_mbps: 20, wire: tls}\n"
                       "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(scn_load("s.yaml", text, &sc, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(sc.runs[0].net.wire.mtu, 1500);
    ck_assert_uint_eq(sc.runs[0].net.wire.tls_record, 16384);
    ck_assert_uint_eq(sc.runs[0].net.wire.tls_overhead, 22);
    scenario rt;
    ck_assert_msg(scn_load("r.yaml", sc.runs[0].yaml, &rt, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(rt.runs[0].hash, sc.runs[0].hash);
    ck_assert_uint_eq(rt.runs[0].net.wire.tls_record, 16384);
    scn_free(&rt);
    scn_free(&sc);
    const char *plain = "model: stories260K\nprotocol: semi2k\n"
                        "network: {latency_ms: 1, bandwidth_mbps: 20, wire: tcp}\n"
                        "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_msg(scn_load("s.yaml", plain, &sc, &e) == MS_OK, "%s", e.msg);
    ck_assert_ptr_null(strstr(sc.runs[0].yaml, "tls_")); /* a plain framing's text is unchanged */
    scn_free(&sc);
    const char *half = "model: stories260K\nprotocol: semi2k\n"
                       "network: {latency_ms: 1, bandwidth_mbps: 20, wire: {tls_overhead: 22}}\n"
                       "workload: {prompt_len: 8, decode_len: 0}\n";
    ck_assert_int_eq(scn_load("s.yaml", half, &sc, &e), MS_ERR_INPUT);
    /* cost --wire tls: a bandwidth-bound prefill is slower than with TCP framing alone, by no
     * more than 22 bytes per record and the segments they may add */
    double lat[2];
    for (int i = 0; i < 2; i++) {
        char args[300];
        const char *out = testdir_path(&td, "cost.json");
        snprintf(args, sizeof args,
                 "cost --model stories260K --protocol semi2k --network 1ms/20Mbps/3100 "
                 "--phase prefill --tokens 16 --json --wire %s",
                 i ? "tls" : "tcp");
        ck_assert_int_eq(th_cli(args, out), 0);
        char *t = th_slurp(out, NULL);
        const char *l = strstr(t, "\"latency_s\":");
        ck_assert_ptr_nonnull(l);
        lat[i] = strtod(l + 12, NULL);
        free(t);
    }
    ck_assert_msg(lat[1] > lat[0] && lat[1] < lat[0] * 1.01, "tls %.6f s, tcp %.6f s", lat[1],
                  lat[0]);
}
END_TEST

Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = th_case(s, "tls", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_tls_default_and_framing, test_key_folder, test_keys_in_memory,
             test_handshakes, test_hello_versions, test_waits_follow_timeout, test_wire_tls_model);
    return s;
}

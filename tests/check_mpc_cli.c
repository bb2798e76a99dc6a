/* check_mpc_cli.c — `mpcsim party` as a user runs it: one process per node on loopback, the
 * demo program end to end in both protocols over TLS with a key folder from `mpcsim party keys`,
 * the plaintext opt-out and its warning, a node with another session's key, stray and impostor
 * connections, a port in use, bad usage, and no secret value in any node's output. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocols/program/kern.h"
#include "protocols/backend/mpc_net.h"
#include "protocols/backend/mpc_tls.h"
#include "harness.h"
#include "mpcfix.h"

/* each test's folder, made and removed by the fixtures */
TESTDIR("check_mpc_cli")
#define dir (td.dir)

/* Starts mpcsim with argv (NULL-terminated after the program name), output to dir/name. */
static pid_t spawn(const char *name, const char *const *args)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return th_spawn(th_bin(), args, NULL, path, NULL);
}

/* The text of dir/name. */
static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return th_slurp(path, NULL);
}

/* Three free loopback ports (bound to 0, then released). */
static void free_ports(char *peers, size_t len)
{
    int fd[3], port[3];
    errbuf e;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(mpc_net_listen("127.0.0.1", 0, &fd[i], &port[i], &e), MS_OK);
    for (int i = 0; i < 3; i++)
        close(fd[i]);
    snprintf(peers, len, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", port[0], port[1], port[2]);
}

/* A key folder dir/name made by `mpcsim party keys`; its path. */
static const char *make_keys(const char *name)
{
    static char path[4][400];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    const char *args[] = {"party", "keys", "--out", path[k], NULL};
    ck_assert_int_eq(th_wait(spawn("keys.txt", args)), 0);
    return path[k];
}

/* Every node gets --keys of one fresh folder unless its extra options choose otherwise. */
static void run_session(const char *pname, const char *const extra[3][10], int want_status)
{
    char peers[128];
    free_ports(peers, sizeof peers);
    const char *keys = make_keys("keys");
    int semi = !strcmp(pname, "semi2k");
    pid_t pid[3];
    for (int i = 0; i < 3; i++) {
        const char *id = i == 0 ? "0" : i == 1 ? "1" : "2";
        const char *args[20] = {"party", "-p", pname, "--peers", peers};
        int k = 5;
        if (semi && i == 2)
            args[k++] = "--dealer";
        else {
            args[k++] = "--id";
            args[k++] = id;
        }
        int own = 0;
        for (int q = 0; extra[i][q]; q++) {
            own |= !strcmp(extra[i][q], "--keys") || !strcmp(extra[i][q], "--insecure-plaintext");
            args[k++] = extra[i][q];
        }
        if (!own) {
            args[k++] = "--keys";
            args[k++] = keys;
        }
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", i);
        pid[i] = spawn(name, args);
    }
    for (int i = 0; i < 3; i++) {
        int st = th_wait(pid[i]);
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", i);
        char *out = slurp(name);
        ck_assert_msg(st == want_status, "%s node %d exited %d: %s", pname, i, st, out);
        free(out);
    }
}

/* A loopback TCP connection to port, retried while nobody listens yet. */
static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int tries = 0; tries < 500; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fd, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        close(fd);
        usleep(10000);
    }
    ck_abort_msg("nobody listens on port %d", port);
    return -1;
}

/* A hello as node `node` of a 3-node session on channel 0, of frame version ver. */
static void put_hello(uint8_t h[MPC_FRAME_HDR], uint16_t ver, uint32_t node, uint32_t seq)
{
    memset(h, 0, MPC_FRAME_HDR);
    mpcfix_frame(h, ver, MPC_FR_HELLO, node, seq, 3);
}

/* Before its real peers, P0 gets a connection that sends garbage, one that says nothing, one
 * of the previous frame version, and an impostor: node 1's key and certificate (a valid one of
 * this session) behind a hello that claims the dealer's slot. It drops them all, says why, and
 * the session still runs; the silent one holds nothing up (the acceptor serves connections
 * at once; check_net test_silent_connections). */
START_TEST(test_stray_connections)
{
    char peers[128];
    free_ports(peers, sizeof peers);
    char first[128];
    snprintf(first, sizeof first, "%s", peers);
    int port0 = atoi(strrchr(strtok(first, ","), ':') + 1);
    const char *keys = make_keys("keys");
    const char *a0[] = {
        "party",  "-p", "semi2k",          "--peers", peers,          "--id", "0", "--demo",
        "--keys", keys, "--random-inputs", "3",       "--timeout-ms", "1000", NULL};
    pid_t p0 = spawn("node0.txt", a0);
    int junk = connect_to(port0), silent = connect_to(port0), old = connect_to(port0);
    ck_assert_int_eq(write(junk, "GET / HTTP/1.0\r\n\r\n0123456789abcdef", 34), 34);
    uint8_t h[MPC_FRAME_HDR];
    put_hello(h, 2, 2, 0);
    ck_assert_int_eq(write(old, h, sizeof h), (ssize_t)sizeof h);
    /* the impostor: a TLS handshake with node 1's credentials for the dealer's (node 2's) slot */
    int imp = connect_to(port0);
    put_hello(h, MPC_FRAME_VERSION, 2, MPC_HELLO_TLS);
    ck_assert_int_eq(write(imp, h, sizeof h), (ssize_t)sizeof h);
    mpc_tls *t = NULL;
    mpc_tls_conn *c = NULL;
    errbuf e;
    ck_assert_msg(mpc_tls_load(keys, 1, &t, &e) == MS_OK, "%s", e.msg);
    fcntl(imp, F_SETFL, fcntl(imp, F_GETFL) | O_NONBLOCK);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t deadline = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 8000000000ull;
    int hr = mpc_tls_handshake(t, imp, 0, 0, "P0", deadline, &c, &e);
    ck_assert_msg(hr != MS_OK, "P0 accepted node 1's certificate for the dealer's slot");
    ck_assert_msg(strstr(e.msg, "P0 closed the connection after the TLS handshake"), "%s", e.msg);
    mpc_tls_free(t);
    const char *a1[] = {
        "party",  "-p", "semi2k",          "--peers", peers,          "--id", "1", "--demo",
        "--keys", keys, "--random-inputs", "3",       "--timeout-ms", "1000", NULL};
    const char *a2[] = {"party",    "-p",           "semi2k", "--peers", peers,
                        "--dealer", "--demo",       "--keys", keys,      "--random-inputs",
                        "3",        "--timeout-ms", "1000",   NULL};
    pid_t p1 = spawn("node1.txt", a1), p2 = spawn("node2.txt", a2);
    int st[3] = {th_wait(p0), th_wait(p1), th_wait(p2)};
    close(junk);
    close(silent);
    close(old);
    close(imp);
    char *out = slurp("node0.txt");
    ck_assert_msg(st[0] == 0 && st[1] == 0 && st[2] == 0, "exits %d %d %d: %s", st[0], st[1], st[2],
                  out);
    ck_assert_msg(strstr(out, "dropped a connection from 127.0.0.1: malformed hello"), "%s", out);
    ck_assert_msg(
        strstr(out,
               "dropped a connection from 127.0.0.1: peer speaks frame version 2, this build 5"),
        "%s", out);
    ck_assert_msg(
        strstr(out,
               "dropped a connection from 127.0.0.1: the peer taken for dealer presented node 1's "
               "certificate: refused"),
        "%s", out);
    ck_assert_msg(strstr(out, "# TLS 1.3: 4 connections"), "%s", out);
    free(out);
}
END_TEST

/* `mpcsim party keys`: the private keys are 0600, the folder 0700, nothing is overwritten. */
START_TEST(test_keys_command)
{
    const char *k = make_keys("k");
    mpcfix_assert_keys(k, 3);
    const char *again[] = {"party", "keys", "--out", k, NULL};
    ck_assert_int_eq(th_wait(spawn("again.txt", again)), 1);
    char *o = slurp("again.txt");
    ck_assert_ptr_nonnull(strstr(o, "already exists"));
    free(o);
    /* a party needs keys or the explicit opt-out */
    const char *nokeys[] = {"party",   "-p",          "semi2k", "--id", "0",
                            "--peers", "a:1,b:2,c:3", "--demo", NULL};
    ck_assert_int_eq(th_wait(spawn("nokeys.txt", nokeys)), 2);
    o = slurp("nokeys.txt");
    ck_assert_ptr_nonnull(strstr(o, "give --keys DIR"));
    free(o);
}
END_TEST

/* --insecure-plaintext on every node: the session runs, and every node warns on stderr. */
START_TEST(test_plaintext_warns)
{
    const char *const extra[3][10] = {
        {"--demo", "--random-inputs", "5", "--insecure-plaintext", NULL},
        {"--demo", "--random-inputs", "5", "--insecure-plaintext", NULL},
        {"--demo", "--insecure-plaintext", NULL}};
    run_session("semi2k", extra, 0);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", i);
        char *out = slurp(name);
        ck_assert_msg(strstr(out, "WARNING: --insecure-plaintext"), "node %d: %s", i, out);
        ck_assert_msg(strstr(out, "# plaintext channels"), "node %d: %s", i, out);
        free(out);
    }
}
END_TEST

/* The dealer holds another session's key: it ends with an error naming P0 well within
 * --timeout-ms; the parties log the refusal and end when their connect timeout passes. */
START_TEST(test_wrong_key)
{
    const char *good = make_keys("good"), *other = make_keys("other");
    char peers[128];
    free_ports(peers, sizeof peers);
    const char *a0[] = {"party",
                        "-p",
                        "semi2k",
                        "--peers",
                        peers,
                        "--id",
                        "0",
                        "--demo",
                        "--keys",
                        good,
                        "--random-inputs",
                        "3",
                        "--timeout-ms",
                        "2000",
                        "--connect-timeout-ms",
                        "3000",
                        NULL};
    const char *a1[] = {"party",
                        "-p",
                        "semi2k",
                        "--peers",
                        peers,
                        "--id",
                        "1",
                        "--demo",
                        "--keys",
                        good,
                        "--random-inputs",
                        "3",
                        "--timeout-ms",
                        "2000",
                        "--connect-timeout-ms",
                        "3000",
                        NULL};
    const char *a2[] = {
        "party",  "-p",     "semi2k", "--peers",      peers,  "--dealer",
        "--demo", "--keys", other,    "--timeout-ms", "2000", "--connect-timeout-ms",
        "3000",   NULL};
    pid_t p0 = spawn("node0.txt", a0), p1 = spawn("node1.txt", a1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t p2 = spawn("node2.txt", a2);
    int s2 = th_wait(p2);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    int s0 = th_wait(p0), s1 = th_wait(p1);
    char *o2 = slurp("node2.txt"), *o0 = slurp("node0.txt");
    ck_assert_msg(s2 == 3, "dealer exit %d: %s", s2, o2);
    ck_assert_msg(strstr(o2, "dealer: TLS handshake with P0 at 127.0.0.1:") &&
                      strstr(o2, "certificate verify failed"),
                  "%s", o2);
    ck_assert_msg(secs < 2.0, "the dealer took %.2f s to fail", secs);
    ck_assert_msg(s0 == 3 && s1 == 3, "parties exited %d %d", s0, s1);
    ck_assert_msg(
        strstr(o0, "dropped a connection from 127.0.0.1: dealer refused this node's certificate"),
        "%s", o0);
    free(o0);
    free(o2);
}
END_TEST

START_TEST(test_demo_sessions)
{
    const char *pr = _i ? "aby3" : "semi2k";
    unsetenv("MPCSIM_NET_TRACE");
    const char *const extra[3][10] = {{"--demo", "--random-inputs", "5", NULL},
                                      {"--demo", "--random-inputs", "5", "--print-outputs", NULL},
                                      {"--demo", "--random-inputs", "5", NULL}};
    run_session(pr, extra, 0);
    char *p1 = slurp("node1.txt");
    ck_assert_ptr_nonnull(strstr(p1, "output probs:"));
    ck_assert_ptr_nonnull(strstr(p1, "total"));
    ck_assert_ptr_nonnull(strstr(p1, "softmax"));
    ck_assert_ptr_null(strstr(p1, "mpc net trace")); /* MPCSIM_NET_TRACE unset: no trace */
    free(p1);
}
END_TEST

/* --repeat 3 --warmup 1: every node runs the program four times and prints the three timed
 * runs, each with the same rounds and bytes as the per-op total of the last run, then the
 * minimum and median time. */
START_TEST(test_repeat)
{
    const char *pr = _i ? "aby3" : "semi2k";
    const char *const extra[3][10] = {
        {"--demo", "--random-inputs", "5", "--repeat", "3", "--warmup", "1", NULL},
        {"--demo", "--random-inputs", "5", "--repeat", "3", "--warmup", "1", NULL},
        {"--demo", "--random-inputs", "5", "--repeat", "3", "--warmup", "1", NULL}};
    run_session(pr, extra, 0);
    for (int node = 0; node < 3; node++) {
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", node);
        char *o = slurp(name);
        ck_assert_msg(strstr(o, "# repeat: 3 timed runs of the program after 1 warm-up run\n"),
                      "%s", o);
        /* the total row of the last run without its time: rounds and bytes */
        const char *tot = strstr(o, "\ntotal ");
        ck_assert_msg(tot != NULL, "%s", o);
        char want[256];
        snprintf(want, sizeof want, "%.*s", (int)(strchr(tot + 1, '\n') - tot - 1), tot + 1);
        *strrchr(want, ' ') = 0;
        for (int k = 1; k <= 3; k++) {
            char lab[32];
            snprintf(lab, sizeof lab, "\nrun%d ", k);
            const char *row = strstr(o, lab);
            ck_assert_msg(row != NULL, "no %s in %s", lab + 1, o);
            ck_assert_msg(!strncmp(row + 7, want + 6, strlen(want) - 6), "%.80s vs %s", row + 1,
                          want);
        }
        double mn, med;
        const char *t = strstr(o, "# time per run: min ");
        ck_assert_msg(t && sscanf(t, "# time per run: min %lf ms, median %lf ms", &mn, &med) == 2,
                      "%s", o);
        ck_assert(mn > 0 && mn <= med);
        free(o);
    }
}
END_TEST

/* The rounds and bytes of a node's table row `label` (rounds, then sent to P0, P1, P2). */
static void table_row(const char *out, const char *label, long v[4])
{
    char key[32];
    snprintf(key, sizeof key, "\n%s ", label);
    const char *row = strstr(out, key);
    ck_assert_msg(row != NULL, "no %s row in %s", label, out);
    ck_assert_int_eq(sscanf(row + strlen(key), "%ld %ld %ld %ld", &v[0], &v[1], &v[2], &v[3]), 4);
}

/* MPCSIM_NET_TRACE=1: one trace line per round on each node's stderr, the protocol's rounds
 * (the key exchange marked setup) as many as the node's table counts (the total and setup
 * rows) and their bytes sent the table's; each line's ends in order. Without it, none
 * (test_demo_sessions). */
START_TEST(test_net_trace)
{
    const char *const extra[3][10] = {{"--demo", "--random-inputs", "5", NULL},
                                      {"--demo", "--random-inputs", "5", NULL},
                                      {"--demo", "--random-inputs", "5", NULL}};
    ck_assert_int_eq(setenv("MPCSIM_NET_TRACE", "1", 1), 0);
    run_session("aby3", extra, 0);
    for (int node = 0; node < 3; node++) {
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", node);
        char *o = slurp(name);
        long tot[4], set[4];
        table_row(o, "total", tot);
        table_row(o, "setup", set);
        long rounds = 0, keyx = 0, sent = 0;
        for (const char *l = strstr(o, "mpc net trace: "); l;
             l = strstr(l + 1, "mpc net trace: ")) {
            int who;
            unsigned long long t0, t1, c0, c1, q0, q1, sn, rv;
            char rest[16] = "";
            const char *t = strstr(l, " t ");
            ck_assert_int_eq(sscanf(l, "mpc net trace: node %d op %*u round %*u %15s", &who, rest),
                             2);
            ck_assert_msg(t && sscanf(t,
                                      " t %llu %llu cpu %llu %llu runq %llu %llu sent %llu recv "
                                      "%llu",
                                      &t0, &t1, &c0, &c1, &q0, &q1, &sn, &rv) == 8,
                          "%.200s", l);
            ck_assert_int_eq(who, node);
            ck_assert(t0 <= t1 && c0 <= c1 && q0 <= q1);
            if (!strcmp(rest, "setup"))
                keyx++;
            else
                rounds++, sent += (long)sn;
        }
        ck_assert_int_eq(keyx, 1);
        ck_assert_int_eq(rounds, tot[0] + set[0]);
        ck_assert_int_eq(sent, tot[1] + tot[2] + tot[3] + set[1] + set[2] + set[3]);
        free(o);
    }
}
END_TEST

/* The client's input is a distinctive value; no node prints it, its fixed-point encoding, or
 * (without --print-outputs) anything revealed. */
START_TEST(test_no_secret_in_output)
{
    char path[300];
    snprintf(path, sizeof path, "%s/x.txt", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 64; i++)
        fprintf(f, "1234.5678\n");
    fclose(f);
    char bind[320];
    snprintf(bind, sizeof bind, "x=%s", path);
    const char *const extra[3][10] = {{"--demo", "--bind", bind, NULL},
                                      {"--demo", "--random-inputs", "9", NULL},
                                      {"--demo", NULL}};
    run_session("semi2k", extra, 0);
    uint64_t fx = fx_encode(1234.5678, 18);
    char dec[32], hex[32], HEX[32];
    snprintf(dec, sizeof dec, "%llu", (unsigned long long)fx);
    snprintf(hex, sizeof hex, "%llx", (unsigned long long)fx);
    snprintf(HEX, sizeof HEX, "%llX", (unsigned long long)fx);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "node%d.txt", i);
        char *out = slurp(name);
        ck_assert_ptr_null(strstr(out, "1234.5"));
        ck_assert_ptr_null(strstr(out, "1234.57"));
        ck_assert_ptr_null(strstr(out, dec));
        ck_assert_ptr_null(strstr(out, hex));
        ck_assert_ptr_null(strstr(out, HEX));
        ck_assert_ptr_null(strstr(out, "output"));
        free(out);
    }
}
END_TEST

START_TEST(test_port_in_use)
{
    int fd, port;
    errbuf e;
    ck_assert_int_eq(mpc_net_listen("127.0.0.1", 0, &fd, &port, &e), MS_OK);
    char peers[128];
    snprintf(peers, sizeof peers, "127.0.0.1:%d,127.0.0.1:1,127.0.0.1:2", port);
    const char *args[] = {
        "party", "-p", "aby3", "--id", "0", "--peers", peers, "--demo", "--insecure-plaintext",
        NULL};
    int st = th_wait(spawn("p.txt", args));
    char *out = slurp("p.txt");
    ck_assert_msg(st == 3, "exit %d: %s", st, out);
    ck_assert_ptr_nonnull(strstr(out, "already in use"));
    free(out);
    close(fd);
    /* a peer that never starts: a clear error once the connect timeout passes */
    char peers2[128];
    free_ports(peers2, sizeof peers2);
    const char *a2[] = {"party", "-p",     "aby3",
                        "--id",  "2",      "--peers",
                        peers2,  "--demo", "--connect-timeout-ms",
                        "300",   "--keys", make_keys("k"),
                        NULL};
    st = th_wait(spawn("p2.txt", a2));
    out = slurp("p2.txt");
    ck_assert_msg(st == 3, "exit %d: %s", st, out);
    ck_assert_ptr_nonnull(strstr(out, "cannot connect to P0"));
    free(out);
}
END_TEST

START_TEST(test_bad_usage)
{
    const char *a1[] = {"party", "-p", "semi2k", "--id", "0", "--demo", NULL};
    ck_assert_int_eq(th_wait(spawn("u1.txt", a1)), 2);
    char *o = slurp("u1.txt");
    ck_assert_ptr_nonnull(strstr(o, "--peers"));
    free(o);
    const char *a2[] = {"party",   "-p",          "aby3",   "--dealer",
                        "--peers", "a:1,b:2,c:3", "--demo", NULL};
    ck_assert_int_eq(th_wait(spawn("u2.txt", a2)), 2);
    const char *a3[] = {"party", "-p", "semi2k", "--id", "0", "--peers", "a:1,b:2", "--demo", NULL};
    ck_assert_int_eq(th_wait(spawn("u3.txt", a3)), 2);
    const char *a4[] = {"party",       "-p",     "semi2k", "--id",        "0", "--peers",
                        "a:1,b:2,c:3", "--demo", "--set",  "frac_bitz=3", NULL};
    ck_assert_int_eq(th_wait(spawn("u4.txt", a4)), 2);
    const char *a5[] = {"party", "--help", NULL};
    ck_assert_int_eq(th_wait(spawn("u5.txt", a5)), 0);
    const char *a6[] = {"party",       "-p",     "semi2k",   "--id", "0", "--peers",
                        "a:1,b:2,c:3", "--demo", "--warmup", "2",    NULL};
    ck_assert_int_eq(th_wait(spawn("u6.txt", a6)), 2);
    o = slurp("u6.txt");
    ck_assert_ptr_nonnull(strstr(o, "--warmup 2 needs --repeat N"));
    free(o);
    const char *a7[] = {"party",       "-p",     "semi2k",   "--id", "0", "--peers",
                        "a:1,b:2,c:3", "--demo", "--repeat", "0",    NULL};
    ck_assert_int_eq(th_wait(spawn("u7.txt", a7)), 2);
}
END_TEST

/* validate --primitives: the backend's counts equal the cost engine's for every primitive. */
START_TEST(test_validate_primitives)
{
    const char *args[] = {"validate", "--primitives", "--n", "100", "--latency-ms", "0", NULL};
    int st = th_wait(spawn("v.txt", args));
    char *out = slurp("v.txt");
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_ptr_null(strstr(out, "MISMATCH"));
    ck_assert_ptr_nonnull(strstr(out, "aby3   b2a"));
    ck_assert_ptr_nonnull(strstr(out, "semi2k matmul(cached B)"));
    ck_assert_ptr_nonnull(strstr(out, "aby3   eqz_spu")); /* SPU's eqz and b2p (compat: spu) */
    ck_assert_ptr_nonnull(strstr(out, "semi2k open_bit"));
    /* 80 columns (× and ÷ are one column each), saying what the check judges */
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
        size_t w = 0;
        for (const char *c = l; *c && *c != '\n'; c++)
            w += ((unsigned char)*c & 0xc0) != 0x80;
        ck_assert_msg(w <= 80, "over 80 columns: %.*s", (int)strcspn(l, "\n"), l);
    }
    ck_assert_ptr_nonnull(strstr(out, "check: bytes and rounds, exactly"));
    free(out);
    /* --wide: every party's bytes, predicted/measured */
    const char *wide[] = {"validate", "--primitives", "--n",  "100",    "--latency-ms",
                          "0",        "-p",           "aby3", "--wide", NULL};
    ck_assert_int_eq(th_wait(spawn("vw.txt", wide)), 0);
    out = slurp("vw.txt");
    ck_assert_ptr_nonnull(strstr(out, "online bytes P1 p/m"));
    ck_assert_ptr_nonnull(strstr(out, "aby3    b2a"));
    free(out);
    const char *bad[] = {"validate", "--primitives", "--protocol", "nope", NULL};
    ck_assert_int_eq(th_wait(spawn("v2.txt", bad)), 2);
}
END_TEST

Suite *mpc_cli_suite(void)
{
    Suite *s = suite_create("mpc_cli");
    TCase *tc = th_case(s, "party", 60);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, 2, test_demo_sessions, test_repeat);
    TH_TESTS(tc, test_no_secret_in_output, test_port_in_use, test_stray_connections,
             test_keys_command, test_plaintext_warns, test_wrong_key, test_bad_usage,
             test_validate_primitives, test_net_trace);
    return s;
}

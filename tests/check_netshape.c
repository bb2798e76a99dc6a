/* check_netshape.c — shaped links for the real backend (sim/secure/netshape.h).
 *
 * Without root: the tbf bucket the links get against what tc-tbf(8) asks of it, and the
 * refusals (not root, a rate outside tbf's range, a launch on links that are not up). With root
 * and iproute2: the namespaces, veth pairs and qdiscs netshape_up makes, read back with ip and
 * tc, and all of them gone after netshape_down. Elsewhere the root part prints SKIPPED and why;
 * under CI it fails instead when CI runs it as root, for then the shaped path must be tested. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sim/engine/net.h"
#include "sim/secure/netshape.h"

static int under_ci(void)
{
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "false") != 0;
}

/* ---- the bucket ---------------------------------------------------------------------------- */

/* tc-tbf(8), "burst": the bucket must hold what arrives per timer tick, rate / HZ (1 ms at the
 * largest HZ, 1000), and more than one packet, or a full frame never finds enough tokens to
 * pass. netshape gives 1 ms of traffic and at least two full Ethernet frames (MTU + 14 bytes
 * of header + 4 of FCS + 7 + 1 of preamble + 12 of gap = 1538 ≤ 1550). */
START_TEST(test_burst_against_tbf)
{
    uint64_t prev = 0;
    for (double rate = 1e5; rate <= 1e11; rate *= 1.25) {
        uint64_t b = net_tbf_burst_bytes(rate);
        ck_assert_msg(b >= 2 * 1550, "%.4g bit/s: bucket %llu below two frames", rate,
                      (unsigned long long)b);
        ck_assert_msg(b >= NETSHAPE_MTU + 14, "%.4g bit/s: one frame does not fit", rate);
        ck_assert_msg((double)b >= floor(rate / 8 / 1000),
                      "%.4g bit/s: bucket %llu below one "
                      "tick (1 ms) of traffic",
                      rate, (unsigned long long)b);
        ck_assert_msg(b >= prev, "the bucket shrinks at %.4g bit/s", rate);
        /* above the two-frame floor it is exactly one millisecond, not more: a deeper bucket
         * lets a message pass as a burst instead of at the rate */
        if (rate / 8 / 1000 >= 3100)
            ck_assert_uint_eq(b, (uint64_t)(rate / 8 / 1000));
        prev = b;
    }
    /* the man page's example: 10 Mbit/s with HZ = 100 needs 10 kbyte; at 1 ms ticks a tenth */
    ck_assert_uint_ge(net_tbf_burst_bytes(10e6), 10e6 / 8 / 1000);
    ck_assert_uint_eq(net_tbf_burst_bytes(24.8e6), 3100);
    ck_assert_uint_eq(net_tbf_burst_bytes(1e10), 1250000);
}
END_TEST

/* ---- refusals -------------------------------------------------------------------------------- */

START_TEST(test_refusals)
{
    netshape s;
    errbuf e;
    /* a launch on links that were never brought up */
    memset(&s, 0, sizeof s);
    mpc_launch l;
    memset(&l, 0, sizeof l);
    snprintf(l.cfg.name, sizeof l.cfg.name, "semi2k");
    mpc_node_result res[MPC_NODES_MAX];
    int n = -1;
    ck_assert_int_eq(netshape_launch(&s, &l, NULL, NULL, res, &n, &e), MS_ERR_INTERNAL);
    ck_assert_msg(strstr(e.msg, "0 namespaces for 3 nodes"), "%s", e.msg);
    netshape_down(&s); /* not up: nothing to do */
    ck_assert_int_eq(s.up, 0);
    /* not root: said plainly, with the way out; as root, checked in a child that drops it */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        netshape t;
        errbuf te;
        int rc = netshape_up(&t, 3, 1e9, &te);
        _exit(rc == MS_ERR_NET && strstr(te.msg, "needs root") && strstr(te.msg, "HINT") && !t.up
                  ? 0
                  : 1);
    }
    ck_assert_int_eq(th_wait(pid), 0);
    if (geteuid() != 0)
        return;
    /* as root: the rate must be one tbf takes */
    if (th_sh("command -v ip && command -v tc", NULL, 0) != 0)
        return; /* the shaped test below says why */
    ck_assert_int_eq(netshape_up(&s, 3, 5e4, &e), MS_ERR_RANGE);
    ck_assert_msg(strstr(e.msg, "tbf rate 5e+04 bit/s outside"), "%s", e.msg);
    ck_assert_int_eq(s.up, 0);
    ck_assert_int_eq(netshape_up(&s, 3, 2e11, &e), MS_ERR_RANGE);
    ck_assert_int_eq(s.up, 0);
}
END_TEST

/* ---- the links, with root ------------------------------------------------------------------- */

/* 1 when namespaces can be made here; otherwise prints why the test is skipped (and fails
 * under CI as root). */
static int can_shape(const char *test)
{
    char out[1024] = "";
    const char *why = NULL;
    if (geteuid() != 0)
        why = "needs root (network namespaces, tc)";
    else if (th_sh("command -v ip >/dev/null && command -v tc >/dev/null", NULL, 0) != 0)
        why = "needs iproute2's ip and tc (scripts/install-deps.sh installs iproute2)";
    else if (th_sh("ip netns add mvprobe$$ && ip netns del mvprobe$$", out, sizeof out) != 0)
        why = "cannot create a network namespace here";
    if (!why)
        return 1;
    ck_assert_msg(!(under_ci() && geteuid() == 0), "%s: %s under CI as root: %s", test, why, out);
    fprintf(stderr, "%s: SKIPPED: shaped links %s %s\n", test, why, out);
    return 0;
}

/* The output of `ip netns exec NS tc qdisc show dev DEV`. */
static const char *qdisc(const netshape *s, int a, int b, char *out, size_t cap)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip netns exec %s tc qdisc show dev %sx%d%d", s->ns[a], s->tag, a, b);
    ck_assert_msg(th_sh(cmd, out, cap) == 0, "%s: %s", cmd, out);
    return out;
}

START_TEST(test_links_up_and_down)
{
    if (!can_shape("test_links_up_and_down"))
        return;
    netshape s;
    errbuf e;
    ck_assert_msg(netshape_up(&s, 3, 1e9, &e) == MS_OK, "%s", e.msg);
    char out[4096], cmd[256], want[64], dev[64];
    ck_assert_int_eq(th_sh("ip netns list", out, sizeof out), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strstr(out, s.ns[i]), "namespace %s missing: %s", s.ns[i], out);
    /* every directed link has its own tbf at the rate with the bucket of net_tbf_burst_bytes */
    snprintf(want, sizeof want, "burst %llub", (unsigned long long)net_tbf_burst_bytes(1e9));
    int links = 0;
    for (int a = 0; a < 3; a++) {
        snprintf(cmd, sizeof cmd, "ip -n %s -o addr show dev lo", s.ns[a]);
        ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
        ck_assert_msg(strstr(out, s.ip[a]), "%s has not its address %s: %s", s.ns[a], s.ip[a], out);
        for (int b = 0; b < 3; b++) {
            if (a == b)
                continue;
            qdisc(&s, a, b, out, sizeof out);
            ck_assert_msg(strstr(out, "qdisc tbf") && strstr(out, "rate 1Gbit") &&
                              strstr(out, want),
                          "link %d→%d: %s", a, b, out);
            snprintf(cmd, sizeof cmd, "ip -n %s -o link show dev %sx%d%d", s.ns[a], s.tag, a, b);
            ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
            ck_assert_msg(strstr(out, "mtu 1500") && strstr(out, "UP"), "link %d→%d: %s", a, b,
                          out);
            snprintf(cmd, sizeof cmd, "ip -n %s route get %s", s.ns[a], s.ip[b]);
            ck_assert_int_eq(th_sh(cmd, out, sizeof out), 0);
            snprintf(dev, sizeof dev, "dev %sx%d%d", s.tag, a, b);
            ck_assert_msg(strstr(out, dev), "%s → %s not through its veth: %s", s.ns[a], s.ip[b],
                          out);
            links++;
        }
    }
    ck_assert_int_eq(links, 6);
    /* down: nothing left behind */
    netshape_down(&s);
    ck_assert_int_eq(s.up, 0);
    ck_assert_int_eq(th_sh("ip netns list", out, sizeof out), 0);
    ck_assert_msg(!strstr(out, s.tag), "left behind: %s", out);
}
END_TEST

Suite *netshape_suite(void)
{
    Suite *s = suite_create("netshape");
    TCase *tc = th_case(s, "netshape", 60);
    TH_TESTS(tc, test_burst_against_tbf, test_refusals, test_links_up_and_down);
    return s;
}

/* check_units.c — one rule for every bandwidth an input gives (a scenario's network, its links
 * and dealer, -n, --bandwidth): bit rates with a unit accepted, a bare number or a byte unit
 * refused with a hint at file:line:col, nothing written; and one way every output writes a
 * rate ("300 Mbit/s"). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_units")

/* A one-run scenario with this network (the rest of its line after "network: "). */
static const char *scn(const char *name, const char *network)
{
    char text[1024];
    snprintf(text, sizeof text,
             "format: 1\nname: u\nmodel: stories260K\nprotocol: semi2k\nnetwork: %s\n"
             "workload: {prompt_len: 8, decode_len: 2}\npolicies: [full]\n",
             network);
    return th_file(&td, name, text);
}

/* The 16-digit config hash of a dry run's first run. */
static void dry_hash(const char *path, char hash[17], char *out, size_t cap)
{
    th_cli_expect(out, cap, 0, "1 run\n", "run %s --dry-run", path);
    ck_assert_msg(strlen(out) > 17 && out[16] == ' ', "%s", out);
    memcpy(hash, out, 16);
    hash[16] = '\0';
}

/* 'bandwidth: RATE' is the same network as the unit-named keys and the LATENCY/BANDWIDTH
 * string (the same config hash), in every spelling of the rule; labels write the rate as
 * "300 Mbit/s". */
START_TEST(test_scenario_rates)
{
    /* the strings first: a network given as a string is named after itself (its hash differs
     * from a mapping's); the mappings from [2] on are one config */
    static const char *const same[] = {
        "20ms/300Mbps",
        "20ms/300Mbit/s",
        "{latency_ms: 20, bandwidth_mbps: 300}",
        "{latency_ms: 20, bandwidth_gbps: 0.3}",
        "{latency_ms: 20, bandwidth: 300Mbit/s}",
        "{latency_ms: 20, bandwidth: 0.3Gbit/s}",
        "{latency_ms: 20, bandwidth: 300Mbps}",
        "{latency_us: 20000, bandwidth: 300000kbit/s}",
    };
    char out[4096], first[17], h[17];
    for (int i = 0; i < TH_N(same); i++) {
        dry_hash(scn("s.yaml", same[i]), i > 2 ? h : first, out, sizeof out);
        if (i > 2)
            ck_assert_msg(!strcmp(h, first), "%s: hash %s, not %s", same[i], h, first);
        ck_assert_msg(strstr(out, " 20ms/300 Mbit/s "), "%s: %s", same[i], out);
        ck_assert_msg(!strstr(out, "Mbps"), "%s", out);
    }
    /* per link and for the dealer */
    dry_hash(scn("l.yaml", "{preset: lan, links: {0-1: {bandwidth: 2Gbit/s}}, dealer: "
                           "{bandwidth: 100Mbit/s}}"),
             h, out, sizeof out);
    dry_hash(scn("l2.yaml", "{preset: lan, links: {0-1: {bandwidth_gbps: 2}}, dealer: "
                            "{bandwidth_mbps: 100}}"),
             first, out, sizeof out);
    ck_assert_str_eq(h, first);
    /* a report of a run with a custom network */
    char db[1024];
    snprintf(db, sizeof db, "%s", testdir_path(&td, "r.db"));
    th_cli_expect(out, sizeof out, 0, NULL, "run %s -o %s -q",
                  scn("r.yaml", "{latency_ms: 5, bandwidth: 2.5Gbit/s}"), db);
    th_cli_expect(out, sizeof out, 0, "5ms/2.5 Gbit/s", "report %s", db);
    ck_assert_int_eq(
        sqlfix_file_int(db, "SELECT count(*) FROM runs WHERE network = '5ms/2.5 Gbit/s' AND "
                            "bandwidth_mbps = 2500"),
        1);
}
END_TEST

/* Refused: byte units (tc(8) reads them, and its lowercase mbps/gbps, as bytes), a bare number,
 * a unit in a unit-named key, a rate given twice; at the value's file:line:col with a hint;
 * exit 2 and no database. */
START_TEST(test_scenario_refused)
{
    static const th_bad bad[] = {
        {"{latency_ms: 20, bandwidth: 1GBps}", ":5:38: error: bad bandwidth '1GBps'", "byte unit",
         "8Gbit/s"},
        {"{latency_ms: 20, bandwidth: 1MBps}", ":5:38: error: bad bandwidth '1MBps'", "byte unit",
         NULL},
        {"{latency_ms: 20, bandwidth: 1gbps}", ":5:38: error: bad bandwidth '1gbps'", "byte unit",
         NULL},
        {"{latency_ms: 20, bandwidth: 300}", ":5:38: error: bad bandwidth '300'", "needs a unit",
         NULL},
        {"{latency_ms: 20, bandwidth: 2000Tbit/s}", ":5:38: error: bad bandwidth", "outside", NULL},
        {"{latency_ms: 20, bandwidth_mbps: 1GBps}",
         ":5:43: error: 'bandwidth_mbps' is a number of Mbit/s", "bandwidth: RATE", "byte units"},
        {"{latency_ms: 20, bandwidth_mbps: 300, bandwidth: 1Gbit/s}",
         ":5:59: error: 'bandwidth_mbps' and 'bandwidth' both given", "one unit", NULL},
        {"{preset: lan, links: {0-1: {bandwidth: 2MBps}}}", ":5:49: error: bad bandwidth '2MBps'",
         "byte unit", NULL},
        {"{preset: lan, dealer: {bandwidth: 100}}", ":5:44: error: bad bandwidth '100'",
         "needs a unit", NULL},
        {"20ms/1GBps", ":5:10: error: network '20ms/1GBps': bad bandwidth '1GBps'", "byte unit",
         NULL},
        {"20ms/300", ":5:10: error: network '20ms/300': bad bandwidth '300'", "needs a unit", NULL},
    };
    char out[4096], db[1024];
    snprintf(db, sizeof db, "%s", testdir_path(&td, "no.db"));
    for (int i = 0; i < TH_N(bad); i++) {
        const char *path = scn("b.yaml", bad[i].text);
        char args[2600];
        snprintf(args, sizeof args, "run %s -o %s -q", path, db);
        ck_assert_int_eq(th_cli_capture(args, out, sizeof out), 2);
        th_bad_msg(path, &bad[i], out, i);
        ck_assert_msg(!th_exists(db), "case %d wrote a database: %s", i, out);
    }
}
END_TEST

/* A serving scenario's network: the same rule, at the value's place, nothing written. */
START_TEST(test_serving_rates)
{
    static const th_bad bad[] = {
        {"20ms/1GBps", ":4:10: error: network '20ms/1GBps': bad bandwidth '1GBps'", "byte unit",
         "LATENCY/BANDWIDTH"},
        {"20ms/300", ":4:10: error: network '20ms/300': bad bandwidth '300'", "needs a unit", NULL},
        {"lam", ":4:10: error: unknown network preset 'lam'", "did you mean 'lan'", NULL},
    };
    char out[4096], db[1024], text[512];
    snprintf(db, sizeof db, "%s", testdir_path(&td, "s.db"));
    for (int i = 0; i < TH_N(bad); i++) {
        snprintf(text, sizeof text,
                 "name: s\nmodel: stories260K\nprotocol: semi2k\nnetwork: %s\n"
                 "workload: {requests: 4, rate: 0.001, system_prompt: 8, turn: 4, decode: 2}\n",
                 bad[i].text);
        const char *path = th_file(&td, "s.yaml", text);
        char args[2600];
        snprintf(args, sizeof args, "serve %s -o %s", path, db);
        ck_assert_int_eq(th_cli_capture(args, out, sizeof out), 2);
        th_bad_msg(path, &bad[i], out, i);
        ck_assert_msg(!th_exists(db), "case %d wrote a database", i);
    }
}
END_TEST

/* The command line: -n, validate's and breakeven's --bandwidth take the same rule; cost writes
 * the rate as "10 Gbit/s". */
START_TEST(test_cli_rates)
{
    char out[8192];
    th_cli_expect(out, sizeof out, 0, "(50 ms, 1 Gbit/s)",
                  "cost -m stories260K -p semi2k -n 50ms/1Gbit/s -k 16");
    th_cli_expect(out, sizeof out, 0, "(0.1 ms, 10 Gbit/s)",
                  "cost -m stories260K -p semi2k -n lan -k 16");
    static const struct {
        const char *arg, *want;
    } bad[] = {{"50ms/1GBps", "byte unit"},
               {"50ms/1MBps", "byte unit"},
               {"50ms/1gbps", "byte unit"},
               {"50ms/100", "needs a unit"}};
    for (int i = 0; i < TH_N(bad); i++) {
        th_cli_expect(out, sizeof out, 2, bad[i].want, "cost -m stories260K -p semi2k -n %s -k 16",
                      bad[i].arg);
        ck_assert_msg(!strstr(out, "latency "), "%s", out);
    }
    th_cli_expect(out, sizeof out, 2, "byte unit", "validate --basic-ops --bandwidth 1GBps");
    th_cli_expect(out, sizeof out, 2, "needs a unit", "validate --basic-ops --bandwidth 100");
    const char *s = scn("be.yaml", "lan");
    th_cli_expect(out, sizeof out, 2, NULL, "breakeven %s --bandwidth 100Mbps,1GBps", s);
}
END_TEST

Suite *units_suite(void)
{
    Suite *s = suite_create("units");
    TCase *tc = th_case(s, "units", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_scenario_rates, test_scenario_refused, test_serving_rates, test_cli_rates);
    return s;
}

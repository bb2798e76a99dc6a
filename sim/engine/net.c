/* net.c — network presets and custom links.
 *
 * Presets (one-way latency per directed link, bandwidth per direction; see
 * sim/engine/SIMULATION.md):
 *
 *   lan      10 Gbit/s, 0.1 ms. Ant Group's (SecretFlow's) published LAN script, AntCPLab/
 *            OpenDory throttle.sh @6d277df, `lan`: `tbf rate 10000mbit`, `netem delay 0.1msec`;
 *            MPC-Pipe (arXiv 2209.13643) likewise gives each party "an upload/download bandwidth
 *            of 10Gbps" (mpc-costs.md §5). SecretFlow's benchmark page publishes only its WAN
 *            (overall_benchmark.md: 100 Mbps, 50 ms) — SPU's LAN runs are unshaped.
 *   wan      100 Mbit/s, 50 ms. SecretFlow's published basic-op benchmark
 *            (docs/developer/benchmark/overall_benchmark.md, 2024-02-21): "100 Mbps, 50 ms
 *            fixed delay" (mpc-costs.md §3). netem applies the delay on egress, so it is a
 *            one-way delay per direction.
 *   wan-spu  300 Mbit/s, 20 ms. SPU's MPC benchmark README (src/libspu/mpc/tools/README.md):
 *            `tc qdisc ... tbf rate 300mbit ...` plus `netem delay 20msec`; the report
 *            generator's "WAN_300mbit_20msec" tables (mpc-costs.md §1, §5).
 *   lan-5g   5 Gbit/s, 0.25 ms. Comet (S&P 2025): "bandwidth between the servers is 5Gbps"
 *            (second-hand summary of the paper, mpc-costs.md §3.2); the paper's latency is not
 *            public, and no MPC-LLM paper's script or text with a 5 Gbit/s LAN and its latency
 *            was found (the one 5 Gbit/s script read, CryptPEFT's bandwidth sweep, fixes 4 ms:
 *            a WAN latency), so 0.25 ms one way (0.5 ms RTT, one data-centre region) is an
 *            ASSUMPTION.
 *   lan-3g   3 Gbit/s, 0.15 ms. Cheetah's published network script (Alibaba-Gemini-Lab/
 *            OpenCheetah, scripts/throttle.sh @1b50e8b, `lan`): `tbf rate 3000mbit` and
 *            `netem delay 0.15msec` on the loopback ("about 0.3ms ping latency"): a message
 *            crosses lo once, so 0.15 ms one way. The 2PC transformer line (Cheetah, then
 *            BumbleBee, BOLT, Nimbus) evaluates its LAN with this script family, forks of
 *            emp-toolkit/emp-readme scripts/throttle.sh, whose own `lan` is 2320 Mbit/s with no
 *            added delay and `wan` 200 Mbit/s, 10 ms (@1026729) — MPCache's README runs
 *            `bash throttle.sh lan` without shipping the script.
 *   lan-1g   1 Gbit/s, 0.5 ms. CryptPEFT (NDSS 2026; 2PC private transformer inference on
 *            SHAFT's CrypTen), its artifact's AE/README.md (Saisai-Xia/CryptPEFT @958eb2d):
 *            "LAN, 1 Gbps, 0.5 ms latency", set by `tc qdisc add dev lo root netem rate 1gbit
 *            delay 0.5ms` — netem on the loopback delays each message once, so 0.5 ms one way
 *            (1 ms RTT); its WAN is 400 Mbit/s, 4 ms. The only MPC transformer setting at
 *            1 Gbit/s with a latency found; the M&M artifact (CPS4AI/OpenMM scripts/throttle.sh,
 *            2PC CNNs) uses 1000mbit with 1 ms one way.
 * The regime each preset puts a 7B decode step in is computed, not assumed: `mpcsim list
 * networks` simulates regime.h's reference step on every preset.
 *
 * The dealer's offline channel uses the same link parameters (the dealer is one more host on
 * the same network).
 *
 * Wire framing (net_wire, NET_WIRE_TCP): what a TCP/IPv4/Ethernet link carries per message.
 *   mtu 1500         Ethernet's IP MTU (RFC 894); the veth pairs of validate --shape use it.
 *   l3l4_bytes 52    IPv4 header 20 (RFC 791) + TCP header 20 (RFC 9293) + the timestamp option,
 *                    10 bytes padded to 12 (RFC 7323 §3; Linux sends it by default,
 *                    net.ipv4.tcp_timestamps = 1): mss = 1500 − 52 = 1448.
 *   l2_bytes 14      the Ethernet II header (6 + 6 + 2): what Linux qdiscs such as tbf count
 *                    (the packet length at the qdisc includes the MAC header; a physical link
 *                    also spends 24 bytes of preamble, FCS and inter-frame gap, set 38 there).
 *   ack_every 2      RFC 1122 §4.2.3.2 and RFC 5681 §4.2: an ACK for at least every second
 *                    full-sized segment; Linux acknowledges as soon as more than one full
 *                    segment is unacknowledged (tcp_input.c, __tcp_ack_snd_check).
 *   msg_bytes        the transport's header per message: 0 by default; mpcsim's backend frames
 *                    every message with MPC_FRAME_HDR = 32 bytes (protocols/backend/mpc_net.h).
 *   tls_record 16384 TLS 1.3 (RFC 8446 §5.1): a record carries at most 2^14 plaintext bytes.
 *                    The backend writes each frame (header + payload) as its own records, so a
 *                    message of m = payload + msg_bytes bytes is ceil(m / 16384) records.
 *   tls_overhead 22  RFC 8446 §5.2: per record a 5-byte header (type, legacy version, length),
 *                    the 1-byte inner content type and the AEAD tag, 16 bytes for
 *                    AES-128/256-GCM (RFC 5116 §5.1) and ChaCha20-Poly1305 (RFC 8439 §2.8),
 *                    every TLS 1.3 suite OpenSSL enables by default; no padding (OpenSSL adds
 *                    none unless asked). The handshake (about 1.1 kB each way per connection
 *                    with the backend's Ed25519 certificates, measured) happens once at set-up,
 *                    before any round, and is reported apart, not charged to any op. */
#include "net.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct net_preset_def {
    const char *name;
    uint64_t latency_ns;
    double bandwidth_bps;
} net_preset_def;

static const net_preset_def presets[] = {
    {"lan", 100000u, 10e9},        /* 0.1 ms, 10 Gbit/s: OpenDory's throttle.sh lan, MPC-Pipe */
    {"wan", 50000000u, 100e6},     /* 50 ms, 100 Mbit/s: SecretFlow overall_benchmark.md */
    {"wan-spu", 20000000u, 300e6}, /* 20 ms, 300 Mbit/s: SPU mpc/tools/README.md */
    {"lan-5g", 250000u, 5e9},      /* 0.25 ms, 5 Gbit/s: Comet's servers (latency ASSUMED) */
    {"lan-3g", 150000u, 3e9},      /* 0.15 ms, 3 Gbit/s: Cheetah's throttle.sh lan */
    {"lan-1g", 500000u, 1e9},      /* 0.5 ms, 1 Gbit/s: CryptPEFT's artifact LAN */
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static const char *const preset_names[N_PRESETS] = {"lan",    "wan",    "wan-spu",
                                                    "lan-5g", "lan-3g", "lan-1g"};

/* Where each preset's figures come from, for `mpcsim list networks` (order of presets[]). */
static const char *const preset_sources[N_PRESETS] = {
    "Ant's OpenDory throttle.sh lan: tbf 10000mbit, netem 0.1msec",
    "SecretFlow's benchmark (overall_benchmark.md): 100 Mbps, 50 ms",
    "SPU mpc/tools/README.md: tbf rate 300mbit, netem delay 20msec",
    "Comet (S&P 2025): 5 Gbps; latency published nowhere: 0.25 ms ASSUMED",
    "Cheetah's throttle.sh lan (OpenCheetah): tbf 3000mbit, netem 0.15msec",
    "CryptPEFT's artifact (AE/README.md) LAN: netem rate 1gbit delay 0.5ms",
};

const char *net_preset_source(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name))
            return preset_sources[i];
    return NULL;
}

const char *const *net_preset_names(size_t *n)
{
    *n = N_PRESETS;
    return preset_names;
}

void net_uniform(net_cfg *n, int n_parties, uint64_t latency_ns, double bandwidth_bps)
{
    memset(n->link, 0, sizeof n->link);
    memset(&n->wire, 0, sizeof n->wire);
    n->n_parties = n_parties;
    for (int s = 0; s < n_parties; s++)
        for (int d = 0; d < n_parties; d++)
            if (s != d)
                n->link[s][d] =
                    (net_link){.latency_ns = latency_ns, .bandwidth_bps = bandwidth_bps};
    n->dealer = (net_link){.latency_ns = latency_ns, .bandwidth_bps = bandwidth_bps};
}

int net_preset(const char *name, int n_parties, net_cfg *out, errbuf *e)
{
    if (n_parties < 1 || n_parties > MPC_PARTIES_MAX)
        return err_set(e, MS_ERR_RANGE, "network: %d parties (1..%d supported)", n_parties,
                       MPC_PARTIES_MAX);
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            memset(out, 0, sizeof *out);
            snprintf(out->name, sizeof out->name, "%s", name);
            net_uniform(out, n_parties, presets[i].latency_ns, presets[i].bandwidth_bps);
            return MS_OK;
        }
    }
    const char *hint = did_you_mean(name, preset_names, N_PRESETS);
    return err_set(e, MS_ERR_NOTFOUND,
                   "unknown network preset '%s'%s%s%s (presets: lan, wan, wan-spu, lan-5g, lan-3g, "
                   "lan-1g; or a custom "
                   "'LATENCY/BANDWIDTH' such as '20ms/300Mbps')",
                   name, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
}

/* ---- custom "LATENCY/BANDWIDTH" ---------------------------------------------------------- */

/* Splits "12.5ms" into a number and a unit suffix. */
static int split_unit(const char *s, double *v, char *unit, size_t unit_sz)
{
    char num[64];
    size_t i = 0;
    while (s[i] && (isdigit((unsigned char)s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                    s[i] == '+' || s[i] == '-')) {
        /* 'e' followed by a letter other than a digit/sign starts no exponent: stop there */
        if ((s[i] == 'e' || s[i] == 'E') &&
            !(isdigit((unsigned char)s[i + 1]) || s[i + 1] == '+' || s[i + 1] == '-'))
            break;
        if (i + 1 >= sizeof num)
            return -1;
        num[i] = s[i];
        i++;
    }
    num[i] = '\0';
    if (i == 0 || parse_double(num, v) != 0 || !(*v >= 0) || !isfinite(*v))
        return -1;
    snprintf(unit, unit_sz, "%s", s + i);
    return 0;
}

/* A unit suffix and its multiplier to the base unit. */
typedef struct net_unit {
    const char *u;
    double m;
} net_unit;

/* *out = the number of s times the multiplier of its unit in units[0..n) (matched with case
 * when match_case, else without); -1 for a bad number or an unknown unit. */
static int unit_value(const char *s, const net_unit *units, size_t n, int match_case, double *out)
{
    double v;
    char u[16];
    if (split_unit(s, &v, u, sizeof u) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(match_case ? strcmp(u, units[i].u) : strcasecmp(u, units[i].u))) {
            *out = v * units[i].m;
            return 0;
        }
    return -1;
}

int net_time_ns(const char *s, uint64_t *out)
{
    static const net_unit units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"", 1e6}, {"s", 1e9}};
    double ns;
    if (unit_value(s, units, sizeof units / sizeof units[0], 1, &ns) != 0 || ns > 1e18)
        return -1;
    *out = (uint64_t)llround(ns);
    return 0;
}

/* Bit rates only, matched with case: SI prefixes with "bit/s", tc(8)'s "kbit"/"mbit"/"gbit",
 * and the common "kbps"/"Mbps"/"Gbps" (b: bits). tc(8) reads "bps", "kbps", "mbps" and "gbps"
 * as bytes per second, so a unit with a capital B ("MBps", "GB/s") or tc's all-lowercase
 * "mbps"/"gbps" is refused (net_rate_why says why), as is a bare number. */
static const net_unit rate_units[] = {
    {"bit/s", 1},     {"kbit/s", 1e3}, {"Kbit/s", 1e3}, {"Mbit/s", 1e6}, {"Gbit/s", 1e9},
    {"Tbit/s", 1e12}, {"bps", 1},      {"kbps", 1e3},   {"Kbps", 1e3},   {"Mbps", 1e6},
    {"Gbps", 1e9},    {"Tbps", 1e12},  {"kbit", 1e3},   {"Kbit", 1e3},   {"mbit", 1e6},
    {"Mbit", 1e6},    {"gbit", 1e9},   {"Gbit", 1e9}};

int net_rate_bps(const char *s, double *out)
{
    if (unit_value(s, rate_units, sizeof rate_units / sizeof rate_units[0], 1, out) != 0)
        return -1;
    return *out >= NET_BW_MIN_BPS && *out <= NET_BW_MAX_BPS ? 0 : -1;
}

const char *net_rate_why(const char *s)
{
    double v;
    char u[16];
    if (split_unit(s, &v, u, sizeof u) != 0)
        return "not a number with a unit, e.g. 300Mbit/s or 10Gbit/s";
    if (!u[0])
        return "a bandwidth needs a unit: e.g. 300Mbit/s, 10Gbit/s";
    if (strchr(u, 'B') || !strcmp(u, "mbps") || !strcmp(u, "gbps"))
        return "a byte unit (tc(8) reads MBps and mbps as bytes/s); write bits, e.g. 8Gbit/s "
               "for 1GBps";
    double bps;
    if (!net_rate_bps(s, &bps))
        return "";
    if (unit_value(s, rate_units, sizeof rate_units / sizeof rate_units[0], 1, &bps) == 0)
        return "outside 1 kbit/s .. 1 Pbit/s";
    return "unknown unit (bit/s, kbit/s, Mbit/s, Gbit/s, or kbps, Mbps, Gbps)";
}

void net_rate_str(double bps, char *out, size_t n)
{
    if (bps >= 1e9)
        snprintf(out, n, "%.4g Gbit/s", bps * 1e-9);
    else if (bps >= 1e6)
        snprintf(out, n, "%.4g Mbit/s", bps * 1e-6);
    else
        snprintf(out, n, "%.4g kbit/s", bps * 1e-3);
}

int net_parse(const char *spec, int n_parties, net_cfg *out, errbuf *e)
{
    const char *slash = strchr(spec, '/');
    if (!slash)
        return net_preset(spec, n_parties, out, e);
    char lat[64], bw[64];
    size_t ll = (size_t)(slash - spec);
    const char *slash2 = strchr(slash + 1, '/');
    if (slash2 && slash2[1] == 's' && (!slash2[2] || slash2[2] == '/')) /* "1Gbit/s" */
        slash2 = strchr(slash2 + 1, '/');
    size_t bl = slash2 ? (size_t)(slash2 - slash - 1) : strlen(slash + 1);
    if (ll == 0 || ll >= sizeof lat || bl >= sizeof bw)
        return err_set(e, MS_ERR_INPUT,
                       "network '%s': expected LATENCY/BANDWIDTH[/BURST], e.g. "
                       "'20ms/300Mbps' or '1ms/20Mbps/3100'",
                       spec);
    memcpy(lat, spec, ll);
    lat[ll] = '\0';
    memcpy(bw, slash + 1, bl);
    bw[bl] = '\0';
    unsigned long long burst = 0;
    if (slash2 && (parse_u64(slash2 + 1, &burst) != 0 ||
                   (burst && (burst < NET_BURST_MIN || burst > NET_BURST_MAX))))
        return err_set(e, MS_ERR_INPUT, "network '%s': bad burst '%s' (bytes: 0, or %u..%llu)",
                       spec, slash2 + 1, NET_BURST_MIN, (unsigned long long)NET_BURST_MAX);
    uint64_t lat_ns;
    double bps;
    if (net_time_ns(lat, &lat_ns) != 0)
        return err_set(e, MS_ERR_INPUT, "network '%s': bad latency '%s' (units ns, us, ms, s)",
                       spec, lat);
    if (net_rate_bps(bw, &bps) != 0)
        return err_set(e, MS_ERR_INPUT, "network '%s': bad bandwidth '%s': %s", spec, bw,
                       net_rate_why(bw));
    if (n_parties < 1 || n_parties > MPC_PARTIES_MAX)
        return err_set(e, MS_ERR_RANGE, "network: %d parties (1..%d supported)", n_parties,
                       MPC_PARTIES_MAX);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", spec);
    net_uniform(out, n_parties, lat_ns, bps);
    net_set_burst(out, burst);
    return MS_OK;
}

int net_wire_check(const net_wire *w, errbuf *e)
{
    if (!w->mtu)
        return MS_OK;
    if (w->mtu < NET_WIRE_MTU_MIN || w->mtu > NET_WIRE_MTU_MAX)
        return err_set(e, MS_ERR_INPUT, "wire: mtu %u outside %u … %u bytes", w->mtu,
                       NET_WIRE_MTU_MIN, NET_WIRE_MTU_MAX);
    if (w->l3l4_bytes > NET_WIRE_HDR_MAX || w->l2_bytes > NET_WIRE_HDR_MAX ||
        w->msg_bytes > NET_WIRE_HDR_MAX)
        return err_set(e, MS_ERR_INPUT,
                       "wire: a header of more than %u bytes (l2 %u, l3l4 %u, msg %u)",
                       NET_WIRE_HDR_MAX, w->l2_bytes, w->l3l4_bytes, w->msg_bytes);
    if (w->l3l4_bytes >= w->mtu)
        return err_set(e, MS_ERR_INPUT, "wire: l3l4_bytes %u leave no payload in an mtu of %u",
                       w->l3l4_bytes, w->mtu);
    if (w->tls_record > 65536 || w->tls_overhead > NET_WIRE_HDR_MAX ||
        (!w->tls_record && w->tls_overhead))
        return err_set(
            e, MS_ERR_INPUT,
            "wire: TLS records of %u bytes with %u bytes of framing (at most 65536 and %u)",
            w->tls_record, w->tls_overhead, NET_WIRE_HDR_MAX);
    return MS_OK;
}

uint64_t net_wire_stream_bytes(const net_wire *w, uint64_t payload)
{
    if (!payload)
        return 0;
    uint64_t m = payload + w->msg_bytes;
    if (w->tls_record) /* COST: RFC 8446 §5.2, tls_overhead per record of at most tls_record bytes
                        */
        m += (m + w->tls_record - 1) / w->tls_record * w->tls_overhead;
    return m;
}

uint64_t net_wire_segments(const net_wire *w, uint64_t payload)
{
    if (!w->mtu || !payload)
        return 0;
    uint64_t mss = w->mtu - w->l3l4_bytes, m = net_wire_stream_bytes(w, payload);
    return (m + mss - 1) / mss;
}

uint64_t net_wire_bytes(const net_wire *w, uint64_t payload, uint64_t reverse_payload)
{
    if (!w->mtu || !payload)
        return payload;
    uint64_t frame = (uint64_t)w->l2_bytes + w->l3l4_bytes, segs = net_wire_segments(w, payload);
    uint64_t bytes = net_wire_stream_bytes(w, payload) + segs * frame;
    if (w->ack_every) { /* COST: one pure ACK frame (headers only) per ack_every reverse segments */
        uint64_t rs = net_wire_segments(w, reverse_payload);
        bytes += (rs < segs ? rs : segs) / w->ack_every * frame;
    }
    return bytes;
}

void net_set_burst(net_cfg *n, uint64_t burst_bytes)
{
    for (int s = 0; s < n->n_parties; s++)
        for (int d = 0; d < n->n_parties; d++)
            if (s != d)
                n->link[s][d].burst_bytes = burst_bytes;
    n->dealer.burst_bytes = burst_bytes;
}

uint64_t net_tbf_burst_bytes(double rate_bps)
{
    /* 1 ms of traffic at the rate, at least two full 1550-byte frames: tbf needs a bucket
     * deeper than one packet to pass it at all (tc-tbf(8), "burst") */
    uint64_t b = (uint64_t)(rate_bps / 8 / 1000);
    return b < 3100 ? 3100 : b;
}

uint64_t net_transfer_ns(const net_link *l, uint64_t bytes)
{
    /* serialization: bytes·8/bandwidth, rounded to the nearest ns (simulate.c computes the
     * same product with 8e9/bandwidth cached per link, so the two agree bit for bit) */
    double ns = (double)bytes * (8e9 / l->bandwidth_bps);
    return ns >= (double)NET_NS_MAX ? NET_NS_MAX : (uint64_t)(ns + 0.5);
}

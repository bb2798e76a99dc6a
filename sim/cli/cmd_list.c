/* cmd_list.c — `mpcsim list models|protocols|policies|networks|machines|keys`: what a scenario
 * may name, and the keys each input file may hold. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opt.h"
#include "models/model.h"
#include "protocols/base/yschema.h"
#include "sim/engine/machine.h"
#include "sim/engine/net.h"
#include "sim/scenario/scn.h"
#include "sim/serve/servescn.h"
#include "sim/engine/regime.h"
#include "sim/trace/trace.h"
#include "sim/policy/policy.h"
#include "sim/policy/compose.h"
#include "sim/policy/pcheck.h"
#include "sim/policy/plugin.h"
#include "protocols/program/proto.h"

static void list_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim list models|protocols|policies|networks|machines [options]\n"
               "       mpcsim list keys [scenario|protocol|network|trace|policy|workload|\n"
               "                         model|machine|synth|manifest|serve]\n\n"
               "Lists what a scenario file may name (scenarios/README.md).\n\n"
               "  models      shipped model descriptions (models/*.yaml) and their shapes\n"
               "  protocols   MPC protocols, parties, and (with --costs) primitive costs\n"
               "  policies    KV-cache policies with their parameters and defaults\n"
               "  networks    network presets: latency and bandwidth per link, where the figures\n"
               "              come from, and the regime each puts a 7B decode step in (computed:\n"
               "              the step is simulated on the preset; sim/engine/regime.h)\n"
               "  machines    machine profiles (protocols/machines/): cores and one core's rates\n"
               "  keys        the keys of an input file, from the tables its reader uses: a\n"
               "              scenario's workload, model files (and inline models), machine\n"
               "              profiles, synthetic-trace parameters, trace\n"
               "              manifests, serving scenarios (all of them without a name)\n\n"
               "options:\n");
    cli_help(c, f);
}

/* ---- the four lists ---------------------------------------------------------------------- */

static const char *fmt_count(char *buf, size_t cap, uint64_t n)
{
    if (n >= 1000000000ull)
        snprintf(buf, cap, "%.2fB", (double)n / 1e9);
    else if (n >= 1000000ull)
        snprintf(buf, cap, "%.1fM", (double)n / 1e6);
    else if (n >= 1000ull)
        snprintf(buf, cap, "%.1fK", (double)n / 1e3);
    else
        snprintf(buf, cap, "%llu", (unsigned long long)n);
    return buf;
}

static int list_models(void)
{
    static char names[256][64];
    size_t n = 0;
    if (model_list(names, 256, &n)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        cli_error("list", "no models/ folder found\n  hint: looked in %s", where);
        return 1;
    }
    printf("%-20s %-6s %6s %6s %6s %8s %7s %7s %11s %8s\n", "model", "family", "layers", "dim",
           "heads", "kv_heads", "ffn_dim", "vocab", "max_context", "params");
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        model_cfg m;
        errbuf e;
        char pc[32];
        if (model_load(names[i], &m, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            bad = 1;
            continue;
        }
        printf("%-20s %-6s %6u %6u %6u %8u %7u %7u %11u %8s\n", names[i],
               m.family == FAM_GPT2 ? "gpt2" : "llama", m.n_layers, m.dim, m.n_heads, m.n_kv_heads,
               m.ffn_dim, m.vocab, m.max_ctx, fmt_count(pc, sizeof pc, model_param_count(&m)));
    }
    return bad;
}

static int list_protocols(int costs, const char *ring_bits, const char *compat, uint64_t elems)
{
    size_t n;
    const proto *const *all = proto_all(&n);
    if (!costs) {
        printf("%-10s %7s %6s  %s\n", "protocol", "parties", "dealer", "summary");
        for (size_t i = 0; i < n; i++)
            printf("%-10s %7d %6s  %s\n", all[i]->name, all[i]->n_parties,
                   all[i]->has_dealer ? "yes" : "no", all[i]->summary ? all[i]->summary : "");
        /* what an option reveals beyond shapes and public counts (protocols/program/PRIMITIVES.md)
         */
        printf("\nleakage by option (--set KEY=VALUE, scenario protocol keys):\n"
               "  topk=network      nothing: an oblivious sorting network or extractions\n"
               "  topk=quickselect  every pivot comparison of QuickSelect, revealed after a\n"
               "                    secret shuffle of distinct keys: a random order's pattern,\n"
               "                    independent of the data; its round and byte counts vary\n"
               "                    from run to run. semi2k's dealer also learns each\n"
               "                    partition's comparison count and knows the permutations\n"
               "                    (as SPU's TTP), so it learns the rank of each pivot\n");
        return 0;
    }
    size_t shown = 0;
    errbuf none = {0}; /* a profile the protocol lacks (compat: crypten on aby3): said, skipped */
    for (size_t i = 0; i < n; i++) {
        proto_cfg cfg;
        errbuf e;
        if (proto_cfg_default(all[i]->name, &cfg, &e) ||
            (ring_bits && proto_cfg_set(&cfg, "ring_bits", ring_bits, &e))) {
            cli_error("list", "%s: %s", all[i]->name, e.msg);
            return 2;
        }
        if (compat && proto_cfg_set(&cfg, "compat", compat, &e)) {
            if (!strstr(e.msg, "has no")) {
                cli_error("list", "%s: %s", all[i]->name, e.msg);
                return 2;
            }
            none = e;
            continue;
        }
        if (shown++)
            putchar('\n');
        fflush(stdout);
        proto_print_costs(stdout, all[i], &cfg, elems);
    }
    if (none.msg[0])
        printf("\n%s\n", none.msg + (strncmp(none.msg, "error: ", 7) ? 0 : 7));
    return 0;
}

/* A policy's parameters, one line each (list_policies). */
static void print_params(const policy_ops *p)
{
    size_t np;
    const policy_param *pp = policy_params(p, &np);
    for (size_t k = 0; k < np; k++) {
        char range[96];
        if (pp[k].choices)
            snprintf(range, sizeof range, "%s", pp[k].choices);
        else
            snprintf(range, sizeof range, "%g..%g", pp[k].lo, pp[k].hi);
        printf("    %-18s %-10s %-20s %s\n", pp[k].key, pp[k].def ? pp[k].def : "", range,
               pp[k].help ? pp[k].help : "");
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shipped compositions (the .yaml files of the data folder's scenarios/policies), in name
 * order, each marked with its file; 1 when one of them does not load (the message on stderr). */
static int list_compositions(void)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/scenarios/policies", mpcsim_datadir());
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* a data folder without them */
    char *names[POLICY_COMPOSE_MAX];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < POLICY_COMPOSE_MAX) {
        size_t len = strlen(de->d_name);
        if (len > 5 && !strcmp(de->d_name + len - 5, ".yaml") && de->d_name[0] != '.')
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 300];
        const policy_ops *p = NULL;
        errbuf e;
        snprintf(path, sizeof path, "%s/%s", dir, names[i] ? names[i] : "");
        if (!names[i] || policy_compose_load(path, &p, &e)) {
            cli_error("list", "%s", names[i] ? e.msg : "out of memory");
            bad = 1;
            free(names[i]);
            continue;
        }
        printf("%-14s %s\n", policy_name(p), policy_summary(p));
        printf("    (composition scenarios/policies/%s; a scenario names it {compose: PATH})\n",
               names[i]);
        printf("    cost: derived from its blocks, each emitting its own ops (POLICIES.md "
               "\"Composing a policy\")\n");
        print_params(p);
        free(names[i]);
    }
    return bad;
}

/* The built-in policies, then the plug-ins loaded (--plugin), each with its file, then the
 * shipped compositions. */
static int list_policies(const char *plugin)
{
    const policy_ops *plug = NULL;
    errbuf e;
    if (plugin && policy_plugin_load(plugin, &plug, &e)) {
        cli_error("list", "--plugin: %s", e.msg);
        return 2;
    }
    size_t n_reg, n_plug;
    const policy_ops *const *reg = policy_all(&n_reg);
    const policy_ops *const *plugs = policy_plugin_all(&n_plug);
    /* the registry, then replay_masks (it runs only on its file), then the plug-ins */
    const policy_ops *builtin[64];
    size_t n = 0;
    for (size_t i = 0; i < n_reg && n < 63; i++)
        builtin[n++] = reg[i];
    builtin[n++] = &policy_replay_masks;
    printf("%-14s %s\n    %-18s %-10s %-20s %s\n", "policy", "summary", "parameter", "default",
           "accepted", "meaning");
    for (size_t i = 0; i < n + n_plug; i++) {
        const policy_ops *p = i < n ? builtin[i] : plugs[i - n];
        printf("%-14s %s\n", policy_name(p), policy_summary(p));
        if (i >= n)
            printf("    (plug-in %s)\n", policy_plugin_path(p));
        /* how far its MPC cost is known to compute its selection (POLICIES.md "Cost checked
         * or declared"); a plug-in's is checked here (sim/policy/pcheck.h) */
        pcheck_cost pc = pcheck_cost_of(p);
        pcheck_result cr = {0};
        errbuf ce = {{0}};
        if (i >= n && pc == PCOST_DECLARED && pcheck_default(p, &cr, &ce))
            snprintf(cr.msg, sizeof cr.msg, "%.500s", ce.msg);
        if (pc == PCOST_SHARES)
            printf("    cost: checked on shares (`validate --policy` compares its selections "
                   "with select(); which parameters: POLICIES.md)\n");
        else if (pc == PCOST_PUBLIC)
            printf("    cost: none (public positions)\n");
        else if (pc == PCOST_CHECKED)
            printf("    cost: checked (`mpcsim policy check %s`: its ops, run on the plain "
                   "engine,\n          gather what select() keeps)\n",
                   policy_name(p));
        else if (cr.ran && cr.match)
            printf("    cost: checked (`mpcsim policy check`: its ops, run on the plain engine,\n"
                   "          gather what select() keeps: %zu masks at its defaults)\n",
                   cr.n_checked);
        else
            printf("    cost declared (its emit_cost ops are not checked against select(): "
                   "%s)\n",
                   i >= n ? cr.msg : "`mpcsim policy check` says why");
        print_params(p);
        if (p->metric_stride)
            printf("    %-18s %-10s %-20s %s\n", "metric_stride", p->metric_stride, "",
                   "(the replay's key, this policy's default)");
    }
    int bad = list_compositions();
    size_t nc, nr;
    const policy_param *cp = policy_common_params(&nc);
    for (size_t k = 0; k < nc; k++)
        printf("%s    %-18s %-10s %g..%-17g %s\n", k ? "" : "every policy takes:\n", cp[k].key,
               cp[k].def ? cp[k].def : "-", cp[k].lo, cp[k].hi, cp[k].help ? cp[k].help : "");
    const policy_param *rp = policy_replay_params(&nr);
    if (nr)
        printf("every policy also takes (the replay's own):\n");
    for (size_t k = 0; k < nr; k++)
        printf("    %-18s %-10s %g..%-17g %s\n", rp[k].key, rp[k].def ? rp[k].def : "", rp[k].lo,
               rp[k].hi, rp[k].help ? rp[k].help : "");
    return bad;
}

static int list_networks(const char *profile)
{
    size_t n;
    const char *const *names = net_preset_names(&n);
    machine_profile mach;
    errbuf e;
    if (machine_load(profile, &mach, &e)) {
        cli_error("list", "%s", e.msg);
        return 1;
    }
    printf("Presets: one-way latency and bandwidth of every party-to-party link (per\n"
           "direction; the dealer's link the same). Regime of one %s decode step\n"
           "at a %u-token KV cache on machine '%s' (%d threads): the shares of its\n"
           "critical path spent computing, serializing bytes and waiting out latency.\n\n",
           REGIME_REF_MODEL, REGIME_REF_KV, mach.name, mach.threads);
    size_t n_protos;
    const proto *const *protos = proto_all(&n_protos);
    for (size_t i = 0; i < n; i++) {
        net_cfg c;
        if (net_preset(names[i], 2, &c, &e)) {
            cli_error("list", "%s", e.msg);
            return 1;
        }
        double bw = c.link[0][1].bandwidth_bps;
        printf("%-8s %g ms, %g %s\n         %s\n", names[i], c.link[0][1].latency_ns / 1e6,
               bw >= 1e9 ? bw / 1e9 : bw / 1e6, bw >= 1e9 ? "Gbit/s" : "Mbit/s",
               net_preset_source(names[i]));
        for (size_t p = 0; p < n_protos; p++) {
            step_regime r;
            if (regime_reference(protos[p]->name, &c, &mach, &r, &e)) {
                cli_error("list", "%s", e.msg);
                return 1;
            }
            printf("         %-6s %8.1f s %-15s compute %2.0f%% bytes %2.0f%% latency %2.0f%%\n",
                   protos[p]->name, r.total_s, regime_name(r.bound), 100 * r.share[REGIME_COMPUTE],
                   100 * r.share[REGIME_BANDWIDTH], 100 * r.share[REGIME_ROUNDS]);
        }
    }
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

static int list_machines(void)
{
    char names[64][64];
    size_t n;
    if (scn_machine_names(names, 64, &n)) {
        cli_error("list", "cannot open %s/protocols/machines", mpcsim_datadir());
        return 1;
    }
    qsort(names, n, sizeof names[0], cmp_name);
    printf("%-12s %7s %11s %11s %11s  %s\n", "machine", "threads", "MAC/s/core", "elem/s/core",
           "PRG B/s", "efficiency MAC/elem/PRG");
    for (size_t i = 0; i < n; i++) {
        machine_profile m;
        errbuf e;
        if (machine_load(names[i], &m, &e)) {
            cli_error("list", "%s", e.msg);
            return 1;
        }
        printf("%-12s %7d %11.4g %11.4g %11.4g  %.2f/%.2f/%.2f\n", names[i], m.threads,
               m.rate[WK_MAC], m.rate[WK_ELEM], m.rate[WK_PRG], m.par_eff[WK_MAC],
               m.par_eff[WK_ELEM], m.par_eff[WK_PRG]);
    }
    printf("\nEach file's comment gives its hardware and derivation; `mpcsim calibrate\n"
           "--threads N -o FILE` measures a profile of your own.\n");
    return 0;
}

/* ---- input-file keys ---------------------------------------------------------------------- */

static int list_keys(const char *file)
{
    size_t n_serve, n_net, n_pol;
    const ys_schema *serve = serve_scenario_schemas(&n_serve);
    const ys_schema *net = scn_network_schemas(&n_net);
    const policy_ops *const *pols = policy_all(&n_pol);
    ys_schema pol[64];
    for (size_t i = 0; i < n_pol && i < 64; i++)
        pol[i] = *policy_schema(pols[i]);
    const struct {
        const char *name;
        const ys_schema *s;
        size_t n;
    } files[] = {{"scenario", scn_schema(), 1},
                 {"protocol", proto_cfg_schema(), 1},
                 {"network", net, n_net},
                 {"trace", scn_trace_schema(), 1},
                 {"figures", scn_figure_schema(), 1},
                 {"policy", pol, n_pol < 64 ? n_pol : 64},
                 {"workload", scn_workload_schema(), 1},
                 {"model", model_schema(), 1},
                 {"machine", machine_schema(), 1},
                 {"synth", trace_synth_schema(), 1},
                 {"manifest", trace_manifest_schema(), 1},
                 {"serve", serve, n_serve}};
    const size_t n_files = sizeof files / sizeof *files;
    const char *names[sizeof files / sizeof *files];
    int found = 0;
    for (size_t i = 0; i < n_files; i++) {
        names[i] = files[i].name;
        if (file && strcmp(file, files[i].name))
            continue;
        for (size_t k = 0; k < files[i].n; k++) {
            if (found++)
                putchar('\n');
            if (ys_print(stdout, &files[i].s[k]))
                return 1;
        }
    }
    if (found)
        return 0;
    const char *dm = did_you_mean(file, names, n_files);
    cli_error("list",
              "no keys for '%s'%s%s%s: scenario, protocol, network, trace, policy, workload, "
              "model, machine, synth, manifest or serve",
              file, dm ? " (did you mean '" : "", dm ? dm : "", dm ? "'?)" : "");
    return 2;
}

/* ---- command ----------------------------------------------------------------------------- */

int cmd_list(int argc, char **argv)
{
    int costs = 0, ring_bits = 0, n_given = 0, have_ring = 0;
    const char *profile = NULL, *plugin = NULL, *compat = NULL;
    unsigned long long elems = 1;
    const cli_opt opts[] = {
        {.name = "costs",
         .kind = CLI_FLAG,
         .dest = &costs,
         .help = "protocols: print each primitive's rounds and bytes"},
        {.name = "ring-bits",
         .kind = CLI_INT,
         .dest = &ring_bits,
         .arg = "N",
         .lo = 2,
         .hi = 128,
         .want = "a bit count 2..128, e.g. 64",
         .seen = &have_ring,
         .help = "protocols --costs: ring size in bits\n(default: the protocol's)"},
        {.name = "elems",
         .short_name = 'n',
         .kind = CLI_U64,
         .dest = &elems,
         .arg = "N",
         .lo = 1,
         .hi = 1u << 24,
         .want = "an element count in [1, 16777216]",
         .seen = &n_given,
         .help = "protocols --costs: elements per primitive (default 1)"},
        {.name = "compat",
         .kind = CLI_STR,
         .dest = &compat,
         .arg = "NAME",
         .help = "protocols --costs: a framework cost profile,\nnative, spu or crypten (semi2k "
                 "only)\n(default: native)"},
        {.name = "profile",
         .kind = CLI_STR,
         .dest = &profile,
         .arg = "NAME",
         .help = "networks: the machine the regimes are computed on\n(default: default)"},
        {.name = "plugin",
         .kind = CLI_STR,
         .dest = &plugin,
         .arg = "PATH.so",
         .help = "policies: also a policy plug-in (POLICIES.md)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"list", opts, sizeof opts / sizeof opts[0], 22, 2};
    const char *pos[2];
    int n_pos = 0, rc = cli_parse_cmd(&cmd, argc, argv, pos, &n_pos, list_usage);
    if (rc)
        return rc == CLI_HELP_ASKED ? 0 : rc;
    if (n_pos == 2 && !strcmp(pos[0], "keys"))
        return list_keys(pos[1]);
    if ((rc = cli_want_one(&cmd, n_pos, "what to list? models, protocols, policies or networks",
                           "list one thing at a time", list_usage)))
        return rc;
    char ring_buf[8];
    const char *ring = NULL;
    if (have_ring) {
        snprintf(ring_buf, sizeof ring_buf, "%d", ring_bits);
        ring = ring_buf;
    }
    static const char *const what[] = {"models",   "protocols", "policies",
                                       "networks", "machines",  "keys"};
    const char *w = pos[0];
    if ((costs || ring || n_given || compat) && strcmp(w, "protocols")) {
        cli_error("list", "--costs, --ring-bits, --compat and -n apply to 'list protocols'");
        return 2;
    }
    if (plugin && strcmp(w, "policies")) {
        cli_error("list", "--plugin applies to 'list policies'");
        return 2;
    }
    if (profile && strcmp(w, "networks")) {
        cli_error("list", "--profile applies to 'list networks'");
        return 2;
    }
    if ((ring || n_given || compat) && !costs) {
        cli_error("list", "--ring-bits, --compat and -n go with --costs");
        return 2;
    }
    if (!strcmp(w, "models"))
        return list_models();
    if (!strcmp(w, "protocols"))
        return list_protocols(costs, ring, compat, elems);
    if (!strcmp(w, "policies"))
        return list_policies(plugin);
    if (!strcmp(w, "networks"))
        return list_networks(profile ? profile : "default");
    if (!strcmp(w, "machines"))
        return list_machines();
    if (!strcmp(w, "keys"))
        return list_keys(NULL);
    const char *dm = did_you_mean(w, what, 6);
    if (dm)
        cli_error("list", "cannot list '%s' (did you mean '%s'?)", w, dm);
    else
        cli_error("list",
                  "cannot list '%s': models, protocols, policies, networks, machines or "
                  "keys",
                  w);
    return 2;
}

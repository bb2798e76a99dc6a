/* cmd_policy.c — `mpcsim policy check`: whether a policy's declared MPC cost computes its
 * selection (sim/policy/pcheck.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dbq.h"
#include "opt.h"
#include "protocols/base/yamlx.h"
#include "sim/policy/compose.h"
#include "sim/policy/pcheck.h"
#include "sim/policy/plugin.h"
#include "sim/scenario/scn.h"
#include "sim/trace/trace.h"

#define MAX_PARAMS 32

typedef struct pol_args {
    const char *trace_dir;
    uint32_t prompt, decode;
    int prompt_set, decode_set;
    const char *params[MAX_PARAMS];
    int n_params;
} pol_args;

static void policy_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim policy check NAME|FILE.yaml|PLUGIN.so [--param K=V]...\n"
               "                           [--trace DIR] [--prompt P] [--decode N]\n\n"
               "Checks that a policy's MPC cost computes its selection. The policy is driven\n"
               "over a trace as a run drives it; every op program its emit_cost builds (the\n"
               "ops a run costs) is executed on the plain fixed-point engine with its operands\n"
               "bound to the trace's keys, values and queries and its state carried from step\n"
               "to step; the cached entries those ops gather at each decode step (with the\n"
               "ones outside its candidates, attended as public) are compared with select()'s\n"
               "keep mask for every layer, KV head and step. NAME is a policy (`mpcsim list\n"
               "policies`) with --param values, FILE a scenario whose policy entries are each\n"
               "checked (on its first run's trace, prompt and decode lengths) or a policy\n"
               "composed from blocks (scenarios/policies/*.yaml) with --param values, PLUGIN\n"
               "a plug-in's shared object.\n\n"
               "A policy can be checked when its emit_cost takes its operands from mpcsim and\n"
               "names its selection (plug-in ABI 1.1: api->input, api->selection;\n"
               "sim/policy/POLICIES.md \"Cost checked or declared\"); otherwise its cost stays\n"
               "declared and the check says what it could not compare. A policy whose kept set\n"
               "is a public function of positions (it observes nothing: streamingllm, random\n"
               "scores) has nothing to check.\n\n"
               "Prints, per policy, \"match\", \"MISMATCH\" with the first differing entry\n"
               "located, \"cost declared\" with the reason, or \"not checked here\" for a\n"
               "policy whose selection `validate --policy` checks on shares. Exit status: 0\n"
               "every policy matched (or has nothing to check), 1 a mismatch or a cost not\n"
               "checked here, 2 bad input.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\nexamples:\n"
               "  mpcsim policy check build/plugins/keynorm.so --param keep=12\n"
               "  mpcsim policy check scenarios/plugin-keynorm.yaml\n");
}

static void policy_top_usage(FILE *f)
{
    fprintf(f, "usage: mpcsim policy check NAME|FILE.yaml|PLUGIN.so [options]\n\n"
               "  check   run a policy's emitted selection ops on the plain engine over a trace\n"
               "          and compare them with its select() (mpcsim policy check --help)\n");
}

/* Checks one policy with its loaded parameters; prints its verdict. 0 match, 1 not. */
static int check_one(const policy_ops *p, const policy_args *a, const char *label, trace *t,
                     const char *dir, const char *trace_what, uint32_t P, uint32_t T, int *fatal)
{
    const char *plug = policy_plugin_path(p);
    char name[600];
    snprintf(name, sizeof name, "%s%s%s%s", label, plug ? " (plug-in " : "", plug ? plug : "",
             plug ? ")" : "");
    if (!p->observe) { /* as validate lays it out: by public indices (secinf_spol_of) */
        printf("%s: nothing to check (its kept set is a public function of positions; it %s)\n",
               name, p->emit_cost ? "observes nothing" : "emits no ops");
        return 0;
    }
    pcheck_result r;
    errbuf e = {{0}};
    int rc = pcheck_run_dir(p, a, t, dir, P, T, &r, &e);
    if (rc) {
        cli_error("policy", "%s: %s", name, e.msg);
        *fatal = rc;
        return 1;
    }
    if (!r.ran && pcheck_cost_of(p) == PCOST_SHARES) {
        const char *comp = policy_compose_path(p);
        printf("%s: not checked here (%s); its selection on shares is checked by `mpcsim "
               "validate --model stories260K --accuracy N --policy %s`\n",
               name, r.msg, comp ? comp : p->name);
        return 1;
    }
    if (!r.ran) {
        printf("%s: cost declared (not checked: %s)\n", name, r.msg);
        return 1;
    }
    if (!r.match) {
        printf("%s: MISMATCH: %s\n", name, r.msg);
        return 1;
    }
    char line[1600];
    printf("%s: match\n", name);
    int k = snprintf(line, sizeof line,
                     "  %zu keep masks (layer x KV head x decode step) equal select()'s, %zu of "
                     "them chosen by its ops",
                     r.n_checked, r.n_chosen);
    if (r.n_ties && k > 0 && (size_t)k < sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k,
                      " (%zu up to ties: scores on the plain engine within the tolerance the "
                      "policy states, largest gap %.3g)",
                      r.n_ties, r.tie_gap);
    if (r.n_carried && k > 0 && (size_t)k < sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k,
                      "; %zu ties carried in its state (its ops chose otherwise among candidates "
                      "within the tolerance of its choice, which the policy adopted; largest gap "
                      "%.3g)",
                      r.n_carried, r.carry_gap);
    if (k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k,
                 "; %zu ops run on the plain engine; %s, prompt %u, decode positions %u..%u",
                 r.n_ops, trace_what, P, P, T - 1);
    dbq_wrap(stdout, line, 80);
    return 0;
}

/* "key=value" strings into kv (checked and loaded into *a). */
static int load_params(const policy_ops *p, const pol_args *pa, kv_param *kv, policy_args *a,
                       errbuf *e)
{
    for (int i = 0; i < pa->n_params; i++) {
        const char *s = pa->params[i], *eq = strchr(s, '=');
        if (!eq || eq == s || (size_t)(eq - s) >= sizeof kv[i].key ||
            strlen(eq + 1) >= sizeof kv[i].val)
            return err_set(e, MS_ERR_INPUT,
                           "--param wants KEY=VALUE (a policy parameter), not '%s'", s);
        memset(&kv[i], 0, sizeof kv[i]);
        memcpy(kv[i].key, s, (size_t)(eq - s));
        snprintf(kv[i].val, sizeof kv[i].val, "%s", eq + 1);
    }
    return policy_args_load(p, kv, (size_t)pa->n_params, "--param", a, e);
}

static int is_yaml(const char *s)
{
    size_t n = strlen(s);
    return (n > 5 && !strcmp(s + n - 5, ".yaml")) || (n > 4 && !strcmp(s + n - 4, ".yml"));
}

/* 1 when kv holds its parameter's default (the policy's or the replay's). */
static int is_default(const policy_ops *p, const kv_param *kv)
{
    size_t n;
    const policy_param *pp = policy_params(p, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pp[i].key, kv->key))
            return pp[i].def && !strcmp(pp[i].def, kv->val);
    pp = policy_replay_params(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pp[i].key, kv->key)) {
            const char *d = policy_replay_default(p, &pp[i]);
            return d && !strcmp(d, kv->val);
        }
    return 0;
}

/* A scenario: each distinct policy entry, on its first run's trace and lengths. */
static int check_file(const char *path, const pol_args *pa)
{
    scenario *s = calloc(1, sizeof *s);
    errbuf e = {{0}};
    if (!s) {
        cli_error("policy", "out of memory");
        return 1;
    }
    int rc = scn_load(path, NULL, s, &e);
    if (rc) {
        cli_fail("policy", rc, e.msg);
        scn_free(s);
        free(s);
        return 2;
    }
    const run_cfg *r0 = &s->runs[0];
    uint32_t P = pa->prompt_set ? pa->prompt : r0->work.prompt_len;
    uint32_t D = pa->decode_set ? pa->decode : r0->work.decode_len;
    trace *t = NULL;
    char what[600];
    if (pa->trace_dir) {
        rc = trace_open(pa->trace_dir, &t, &e);
        snprintf(what, sizeof what, "trace %s", pa->trace_dir);
    } else if (!strcmp(r0->trace.source, "none") || !r0->trace.source[0]) {
        rc = pcheck_default_trace(P + D, &t, what, sizeof what, &e);
    } else {
        run_cfg *c = calloc(1, sizeof *c);
        rc = c ? MS_OK : MS_ERR_NOMEM;
        if (c) {
            *c = *r0;
            c->yaml = NULL;
            c->work.prompt_len = P;
            c->work.decode_len = D;
            rc = trace_open_run(c, &t, &e);
            free(c);
        }
        snprintf(what, sizeof what, "%s trace of %s's first run", r0->trace.source, path);
    }
    int bad = 0, fatal = 0;
    if (rc) {
        cli_fail("policy", rc, e.msg);
        bad = 2;
    } else if (P + D > trace_get_shape(t)->n_tokens) { /* a text shorter than the run */
        uint32_t n = trace_get_shape(t)->n_tokens;
        D = n > P ? n - P : 0;
    }
    char(*done)[600] = calloc(s->n_runs + 1, sizeof *done); /* the entries checked */
    size_t n_done = 0;
    if (!done && !bad) {
        cli_error("policy", "out of memory");
        bad = 1;
    }
    for (size_t i = 0; !bad && !fatal && i < s->n_runs; i++) {
        const run_cfg *c = &s->runs[i];
        const policy_ops *p = policy_find(c->policy.name);
        policy_args a;
        if (!p || (rc = policy_args_load(p, c->policy.params, c->policy.n_params, path, &a, &e))) {
            cli_fail("policy", rc ? rc : MS_ERR_INPUT, p ? e.msg : "unknown policy");
            bad = 2;
            break;
        }
        char label[600]; /* the entry as given: its parameters away from their defaults */
        size_t at = (size_t)snprintf(label, sizeof label, "%s", c->policy.name), shown = 0;
        for (size_t k = 0; k < c->policy.n_params && at < sizeof label; k++) {
            const kv_param *kv = &c->policy.params[k];
            if (is_default(p, kv))
                continue;
            at += (size_t)snprintf(label + at, sizeof label - at, "%s%s=%s", shown++ ? ", " : " {",
                                   kv->key, kv->val);
        }
        if (shown && at < sizeof label)
            snprintf(label + at, sizeof label - at, "}");
        int seen = 0;
        for (size_t j = 0; j < n_done && !seen; j++)
            seen = !strcmp(done[j], label);
        if (seen)
            continue;
        snprintf(done[n_done++], sizeof done[0], "%s", label);
        const char *dir = pa->trace_dir                      ? pa->trace_dir
                          : !strcmp(r0->trace.source, "npy") ? r0->trace.path
                                                             : NULL;
        bad |= check_one(p, &a, label, t, dir, what, P, P + D, &fatal);
    }
    free(done);
    trace_close(t);
    scn_free(s);
    free(s);
    return fatal ? ms_err_exit_code(fatal) : bad > 1 ? 2 : bad;
}

/* 1 when the YAML file at path is a composition: a mapping with none of a scenario's keys. */
static int is_composition(const char *path)
{
    static const char *const scn_keys[] = {"format",   "cases", "model", "policies", "protocol",
                                           "workload", "trace", "sweep", NULL};
    yx_node *root = NULL;
    errbuf e;
    if (yx_parse_file(path, &root, &e))
        return 0; /* the scenario reader reports it */
    int comp = root->kind == YX_MAP;
    for (size_t i = 0; comp && scn_keys[i]; i++)
        comp = !yx_map_get(root, scn_keys[i]);
    yx_free(root);
    return comp;
}

static int check_named(const char *arg, const pol_args *pa)
{
    errbuf e = {{0}};
    const policy_ops *p = NULL;
    int rc;
    if (is_yaml(arg)) { /* a composition (is_composition) */
        if ((rc = policy_compose_load(arg, &p, &e))) {
            cli_fail("policy", rc, e.msg);
            return 2;
        }
    } else if (policy_plugin_is_path(arg)) {
        if ((rc = policy_plugin_load(arg, &p, &e))) {
            cli_error("policy", "%s", e.msg);
            return 2;
        }
    } else if (!(p = policy_find(arg))) {
        cli_error("policy", "no policy '%s' (mpcsim list policies), scenario or plug-in file", arg);
        return 2;
    }
    kv_param kv[MAX_PARAMS];
    policy_args a;
    if ((rc = load_params(p, pa, kv, &a, &e))) {
        cli_fail("policy", rc, e.msg);
        return 2;
    }
    uint32_t P = pa->prompt_set ? pa->prompt : 32, D = pa->decode_set ? pa->decode : 32;
    trace *t = NULL;
    char what[600];
    if (pa->trace_dir) {
        rc = trace_open(pa->trace_dir, &t, &e);
        snprintf(what, sizeof what, "trace %s", pa->trace_dir);
    } else
        rc = pcheck_default_trace(P + D, &t, what, sizeof what, &e);
    if (rc) {
        cli_fail("policy", rc, e.msg);
        return 2;
    }
    if (pa->trace_dir && !pa->decode_set) { /* the trace's tokens after the prompt */
        uint32_t n = trace_get_shape(t)->n_tokens;
        D = n > P ? n - P : 0;
    }
    int fatal = 0;
    int bad = check_one(p, &a, p->name, t, pa->trace_dir, what, P, P + D, &fatal);
    trace_close(t);
    return fatal ? ms_err_exit_code(fatal) : bad;
}

int cmd_policy(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        policy_top_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "check")) {
        cli_error("policy", "unknown subcommand '%s' (check)", argv[1]);
        policy_top_usage(stderr);
        return 2;
    }
    pol_args pa = {0};
    cli_list params = {pa.params, 0, MAX_PARAMS};
    const cli_opt opts[] = {
        {.name = "param",
         .kind = CLI_LIST,
         .dest = &params,
         .arg = "K=V",
         .help = "a parameter of NAME or PLUGIN.so (repeatable)"},
        {.name = "trace",
         .kind = CLI_STR,
         .dest = &pa.trace_dir,
         .arg = "DIR",
         .help = "a trace folder (mpcsim trace record); default: stories260K recorded\n"
                 "over tests/data/tinystories_sample.txt"},
        {.name = "prompt",
         .kind = CLI_U32,
         .dest = &pa.prompt,
         .arg = "P",
         .lo = 1,
         .seen = &pa.prompt_set,
         .help = "prompt positions (default 32, or the scenario's prompt_len)"},
        {.name = "decode",
         .kind = CLI_U32,
         .dest = &pa.decode,
         .arg = "N",
         .lo = 1,
         .seen = &pa.decode_set,
         .help = "decode steps checked (default 32, the scenario's decode_len, or\n"
                 "the rest of --trace)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    cli_cmd cmd = {"policy check", opts, sizeof opts / sizeof opts[0], 24, 2};
    const char *arg;
    int rc =
        cli_parse_one(&cmd, argc - 1, argv + 1, &arg, "which policy? NAME, FILE.yaml or PLUGIN.so",
                      "one policy at a time", policy_usage);
    if (rc)
        return rc == CLI_HELP_ASKED ? 0 : rc;
    pa.n_params = params.n;
    if (is_yaml(arg) && !is_composition(arg)) {
        if (pa.n_params) {
            cli_error(
                "policy",
                "--param goes with NAME, a composition or PLUGIN.so; a scenario gives its own");
            return 2;
        }
        return check_file(arg, &pa);
    }
    return check_named(arg, &pa);
}

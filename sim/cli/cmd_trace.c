/* cmd_trace.c — `mpcsim trace record|synth|fit|info`. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opt.h"
#include "sim/trace/trace.h"

/* The options of every subcommand, in one place: each subcommand's table writes here. */
typedef struct trace_args {
    const char *model, *text, *out;
    uint32_t max_tokens, tokens, sinks;
    unsigned long long seed;
    double tol;
    int stats, verify, have_sinks;
    /* synth: --params and --set apply in the order given, on top of the model family's
     * defaults: they are kept until the model is known ('p' or 'S' in kinds) */
    const char *given[64];
    char kinds[64];
    size_t n_given;
} trace_args;

static trace_args A;

static int take_synth_param(const cli_opt *o, const char *arg, errbuf *e)
{
    char kind = o->short_name;
    if (kind == 'S' && !strchr(arg, '='))
        return err_set(e, MS_ERR_USAGE, "--set expects KEY=VALUE, got '%s'", arg);
    if (A.n_given == sizeof A.given / sizeof A.given[0])
        return err_set(e, MS_ERR_USAGE, "at most %zu --params/--set options", A.n_given);
    A.kinds[A.n_given] = kind;
    A.given[A.n_given++] = arg;
    return MS_OK;
}

#define HELP_OPT                                                                 \
    {                                                                            \
        .name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help" \
    }

static const cli_opt record_opts[] = {
    {.name = "model",
     .short_name = 'm',
     .kind = CLI_STR,
     .dest = &A.model,
     .arg = "NAME",
     .help = "a model with weights (default stories260K)"},
    {.name = "text",
     .short_name = 't',
     .kind = CLI_STR,
     .dest = &A.text,
     .arg = "FILE",
     .help = "the text to run"},
    {.name = "max-tokens",
     .short_name = 'n',
     .kind = CLI_U32,
     .dest = &A.max_tokens,
     .arg = "N",
     .lo = 1,
     .hi = 1u << 24,
     .want = "an integer in [1, 16777216]",
     .help = "at most N tokens of the text (default 256)"},
    {.name = "output",
     .short_name = 'o',
     .kind = CLI_STR,
     .dest = &A.out,
     .arg = "DIR",
     .help = "the trace directory to write"},
    HELP_OPT,
};

static const cli_opt synth_opts[] = {
    {.name = "model",
     .short_name = 'm',
     .kind = CLI_STR,
     .dest = &A.model,
     .arg = "NAME",
     .help = "the model whose shape the trace has"},
    {.name = "tokens",
     .short_name = 'T',
     .kind = CLI_U32,
     .dest = &A.tokens,
     .arg = "T",
     .lo = 1,
     .hi = 1u << 24,
     .want = "an integer in [1, 16777216]",
     .help = "trace length in tokens"},
    {.name = "seed",
     .short_name = 's',
     .kind = CLI_U64,
     .dest = &A.seed,
     .arg = "S",
     .want = "an unsigned integer",
     .help = "generator seed (default 1)"},
    {.name = "params",
     .short_name = 'p',
     .kind = CLI_FN,
     .arg = "FILE",
     .fn = take_synth_param,
     .help = "synthetic parameters from a YAML file (`mpcsim trace\nfit` writes one)"},
    {.name = "set",
     .short_name = 'S',
     .kind = CLI_FN,
     .arg = "KEY=VALUE",
     .fn = take_synth_param,
     .help = "one synthetic parameter (repeatable; with --params, in\nthe order given)"},
    {.name = "stats",
     .short_name = 'x',
     .kind = CLI_FLAG,
     .dest = &A.stats,
     .help = "print summary statistics without writing"},
    {.name = "output",
     .short_name = 'o',
     .kind = CLI_STR,
     .dest = &A.out,
     .arg = "DIR",
     .help = "the trace directory to write"},
    HELP_OPT,
};

static const cli_opt fit_opts[] = {
    {.name = "sinks",
     .short_name = 'k',
     .kind = CLI_U32,
     .dest = &A.sinks,
     .arg = "N",
     .hi = 1024,
     .want = "an integer in [0, 1024]",
     .seen = &A.have_sinks,
     .help = "the sink keys the fit assumes (default: the synthetic\ndefault)"},
    {.name = "output",
     .short_name = 'o',
     .kind = CLI_STR,
     .dest = &A.out,
     .arg = "FILE",
     .help = "also write the parameters to FILE"},
    HELP_OPT,
};

static const cli_opt info_opts[] = {
    {.name = "verify",
     .short_name = 'v',
     .kind = CLI_FLAG,
     .dest = &A.verify,
     .help = "check the values, the attention rows and the model's\nforward pass (see above)"},
    {.name = "tol",
     .short_name = 't',
     .kind = CLI_F64,
     .dest = &A.tol,
     .arg = "X",
     .lo = DBL_MIN,
     .hi = 1,
     .want = "a number in (0, 1]",
     .help = "--verify's relative tolerance (default 1e-4)"},
    HELP_OPT,
};

#define CMD_OF(name, opts, max_pos)                           \
    {                                                         \
        name, opts, sizeof opts / sizeof opts[0], 24, max_pos \
    }
static const cli_cmd record_cmd = CMD_OF("trace record", record_opts, 0);
static const cli_cmd synth_cmd = CMD_OF("trace synth", synth_opts, 0);
static const cli_cmd fit_cmd = CMD_OF("trace fit", fit_opts, 1);
static const cli_cmd info_cmd = CMD_OF("trace info", info_opts, 1);
static const cli_cmd *const sub_cmds[] = {&record_cmd, &synth_cmd, &fit_cmd, &info_cmd};

static void usage(FILE *f)
{
    fprintf(f, "usage: mpcsim trace record --model NAME --text FILE [--max-tokens N] -o DIR\n"
               "       mpcsim trace synth --model NAME --tokens T [--seed S] [--params FILE]\n"
               "                          [--set KEY=VALUE]... (-o DIR | --stats)\n"
               "       mpcsim trace fit DIR [--sinks N] [-o params.yaml]\n"
               "       mpcsim trace info DIR [--verify [--tol X]]\n"
               "       mpcsim trace SUBCOMMAND --help\n\n"
               "record  runs the float reference of a model with weights (stories260K) over a\n"
               "        text and writes q, k, v, att, ffn, logits, wo and tokens (.npy +\n"
               "        manifest)\n"
               "synth   generates a synthetic trace for any model shape; --stats prints summary\n"
               "        statistics without writing (the generator streams)\n"
               "fit     estimates synthetic parameters from a trace (prints YAML; -o writes it)\n"
               "info    prints a trace's manifest summary; --verify also checks every value is\n"
               "        finite, every stored attention row is softmax(q·k/√d) of the trace's\n"
               "        own q and k, and (when the model's weights are here) that q, k, v, ffn\n"
               "        and logits equal the model's forward pass on the trace's tokens; the\n"
               "        first mismatch is named and the exit status is 2 (--tol, default 1e-4)\n\n"
               "synthetic parameters (--set KEY=VALUE):\n"
               "  sink n_sinks local window heavy heavy_frac layer_sim drift noise ffn_sparsity\n"
               "  generator group_sim (GQA: how alike the query heads of a KV head attend)\n"
               "  (sim/trace/TRACE_FORMAT.md explains each)\n");
    for (size_t i = 0; i < sizeof sub_cmds / sizeof *sub_cmds; i++) {
        fprintf(f, "\n%s options:\n", sub_cmds[i]->name + 6);
        cli_help(sub_cmds[i], f);
    }
}

/* A subcommand's --help: its usage line from the overview's, and its options. */
static void sub_usage(FILE *f, const cli_cmd *c)
{
    static const char *const lines[] = {
        "record --model NAME --text FILE [--max-tokens N] -o DIR\n\n"
        "Runs the float reference of a model with weights (stories260K) over a text and\n"
        "writes q, k, v, att, ffn, logits, wo and tokens (.npy + manifest).\n",
        "synth --model NAME --tokens T [--seed S] [--params FILE]\n"
        "                          [--set KEY=VALUE]... (-o DIR | --stats)\n\n"
        "Generates a synthetic trace for any model shape; --stats prints summary\n"
        "statistics without writing (the generator streams). Parameters (--set): sink\n"
        "n_sinks local window heavy heavy_frac layer_sim drift noise ffn_sparsity\n"
        "generator group_sim (sim/trace/TRACE_FORMAT.md explains each).\n",
        "fit DIR [--sinks N] [-o params.yaml]\n\n"
        "Estimates synthetic parameters from a trace (prints YAML; -o writes it).\n",
        "info DIR [--verify [--tol X]]\n\n"
        "Prints a trace's manifest summary; --verify also checks every value is finite,\n"
        "every stored attention row is softmax(q·k/√d) of the trace's own q and k, and\n"
        "(when the model's weights are here) that q, k, v, ffn and logits equal the\n"
        "model's forward pass on the trace's tokens; the first mismatch is named and\n"
        "the exit status is 2.\n",
    };
    for (size_t i = 0; i < sizeof sub_cmds / sizeof *sub_cmds; i++)
        if (sub_cmds[i] == c)
            fprintf(f, "usage: mpcsim trace %s\noptions:\n", lines[i]);
    cli_help(c, f);
}

/* 0 ok, -1 --help printed, 2 usage error (printed). */
static int parse_sub(const cli_cmd *c, int argc, char **argv, const char **dir)
{
    int n_pos = 0, rc = cli_parse_cmd(c, argc, argv, dir, &n_pos, sub_usage);
    if (rc)
        return rc == CLI_HELP_ASKED ? -1 : rc;
    if (c->max_pos && n_pos != 1) {
        cli_error("trace", "%s needs exactly one trace directory", c->name + 6);
        return 2;
    }
    return 0;
}

/* Messages that already read "file:line:col: error: …" print as they are. */
static int fail(int rc, const errbuf *e)
{
    if (strstr(e->msg, ": error: "))
        fprintf(stderr, "%s\n", e->msg);
    else
        cli_error("trace", "%s", e->msg);
    return ms_err_exit_code(rc);
}

/* ---- record --------------------------------------------------------------------------- */

static int cmd_record(int argc, char **argv)
{
    A = (trace_args){.model = "stories260K", .max_tokens = 256};
    int st = parse_sub(&record_cmd, argc, argv, NULL);
    if (st)
        return st < 0 ? 0 : st;
    const char *model = A.model, *text = A.text, *out = A.out;
    uint32_t max_tokens = A.max_tokens;
    if (!text || !out) {
        cli_error("trace", "record needs --text FILE, -o DIR and --max-tokens > 0");
        return 2;
    }
    errbuf e = {{0}};
    int rc = trace_record(model, text, max_tokens, out, &e);
    if (rc != MS_OK)
        return fail(rc, &e);
    trace *t = NULL;
    if ((rc = trace_open(out, &t, &e)) != MS_OK)
        return fail(rc, &e);
    printf("recorded %u tokens of %s into %s\n", trace_get_shape(t)->n_tokens, model, out);
    trace_close(t);
    return 0;
}

/* ---- synth ---------------------------------------------------------------------------- */

static void print_stats(const trace_stats *st)
{
    printf("rows:          %llu\n", (unsigned long long)st->rows);
    printf("sink_mass:     %.4f\n", st->sink_mass);
    printf("local_mass:    %.4f\n", st->local_mass);
    printf("heavy_mass:    %.4f\n", st->heavy_mass);
    printf("layer_overlap: %.4f\n", st->layer_overlap);
    printf("q_cos:         %.4f\n", st->q_cos);
    if (!isnan(st->ffn_neg))
        printf("ffn_neg:       %.4f\n", st->ffn_neg);
    printf("sparsity:      %.4f   (H2O: entries < 1%% of the row's largest; smallest layer "
           "%.4f)\n",
           st->sparsity, st->sparsity_min_layer);
    printf("top5_mass:     %.4f   (mass on the top 5%% of entries)\n", st->top5_mass);
    printf("sink_top:      %.4f   (rows led by a sink key)\n", st->sink_top);
}

/* Writes every position of t into dir (q, k, v, att, ffn, wo; att rows computed). */
static int write_trace(trace *t, const char *dir, errbuf *e)
{
    const trace_shape *s = trace_get_shape(t);
    unsigned arrays = 0;
    for (int a = 0; a < TRACE_N_ARRAYS; a++)
        if (trace_has(t, (trace_array)a))
            arrays |= 1u << a;
    trace_writer *w = NULL;
    int rc = trace_writer_open(dir, s, trace_model_name(t),
                               trace_is_synthetic(t) ? "synth" : "copy", arrays, &w, e);
    if (rc != MS_OK)
        return rc;
    const trace_synth *sp = trace_synth_params(t);
    if (sp) {
        char seed[32], params[512];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)trace_seed(t));
        snprintf(params, sizeof params,
                 "{sink: %.9g, n_sinks: %u, local: %.9g, window: %.9g, "
                 "heavy: %.9g, heavy_frac: %.9g, layer_sim: %.9g, drift: %.9g, noise: %.9g, "
                 "ffn_sparsity: %.9g, generator: %u, group_sim: %.9g}",
                 sp->sink, sp->n_sinks, sp->local, sp->window, sp->heavy, sp->heavy_frac,
                 sp->layer_sim, sp->drift, sp->noise, sp->ffn_sparsity, sp->generator,
                 sp->group_sim);
        trace_writer_meta(w, "seed", seed);
        trace_writer_meta(w, "synth", params);
    }
    size_t kvn = (size_t)s->n_kv_heads * s->head_dim;
    float *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
    int32_t *tok = calloc(s->n_tokens, sizeof *tok);
    if (!k || !v || !tok)
        rc = MS_ERR_NOMEM;
    if (rc == MS_OK && trace_tokens(t))
        memcpy(tok, trace_tokens(t), s->n_tokens * sizeof *tok);
    if (rc == MS_OK)
        rc = trace_writer_tokens(w, tok, s->n_tokens);
    for (uint32_t l = 0; rc == MS_OK && l < s->n_layers && trace_has(t, TRACE_WO); l++)
        rc = trace_writer_wo(w, l, trace_wo(t, l, NULL, NULL));
    for (uint32_t p = 0; rc == MS_OK && p < s->n_tokens; p++) {
        if ((rc = trace_seek(t, p, e)) != MS_OK)
            break;
        for (uint32_t l = 0; rc == MS_OK && l < s->n_layers; l++) {
            trace_kv(t, l, p, k, v);
            rc = trace_writer_row(w, l, p, trace_q(t, l), k, v, trace_att(t, l), trace_ffn(t, l));
        }
        if (rc == MS_OK && trace_logits(t))
            rc = trace_writer_logits(w, p, trace_logits(t));
    }
    errbuf we;
    int wrc = trace_writer_close(w, &we);
    if (rc == MS_OK && wrc != MS_OK)
        rc = err_set(e, wrc, "%s", we.msg);
    else if (rc != MS_OK && !e->msg[0])
        err_set(e, rc, "%s: error: writing the trace failed (%s)", dir, ms_err_text(rc));
    free(k);
    free(v);
    free(tok);
    return rc;
}

static int cmd_synth(int argc, char **argv)
{
    A = (trace_args){.seed = 1};
    int st = parse_sub(&synth_cmd, argc, argv, NULL);
    if (st)
        return st < 0 ? 0 : st;
    const char *model = A.model, *out = A.out;
    uint32_t T = A.tokens;
    unsigned long long seed = A.seed;
    int stats = A.stats;
    if (!model || T == 0 || (!out && !stats)) {
        cli_error("trace", "synth needs --model NAME, --tokens T > 0 and -o DIR or --stats");
        return 2;
    }
    trace_synth p;
    errbuf e = {{0}};
    model_cfg cfg;
    trace *t = NULL;
    int rc = model_load(model, &cfg, &e);
    if (rc == MS_OK)
        trace_synth_defaults_for(&p, cfg.family);
    for (size_t i = 0; rc == MS_OK && i < A.n_given; i++) {
        if (A.kinds[i] == 'p') {
            rc = trace_synth_read_yaml(&p, A.given[i], &e);
        } else {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", A.given[i]);
            char *eq = strchr(kv, '=');
            *eq = '\0';
            rc = trace_synth_set(&p, kv, eq + 1, &e);
        }
    }
    if (rc == MS_OK)
        rc = trace_open_synth(&cfg, T, seed, &p, &t, &e);
    if (rc == MS_OK && out)
        rc = write_trace(t, out, &e);
    if (rc == MS_OK && stats) {
        trace_stats ts;
        trace_synth fitted;
        rc = trace_fit(t, &p, &fitted, &ts, &e);
        if (rc == MS_OK) {
            printf("# synthetic %s, %u tokens, seed %llu\n", cfg.name, T, seed);
            print_stats(&ts);
        }
    }
    if (rc == MS_OK && out)
        printf("wrote %u synthetic tokens of %s into %s\n", T, cfg.name, out);
    trace_close(t);
    return rc == MS_OK ? 0 : fail(rc, &e);
}

/* ---- fit, info ------------------------------------------------------------------------ */

static int cmd_fit(int argc, char **argv)
{
    A = (trace_args){0};
    const char *dir;
    int st = parse_sub(&fit_cmd, argc, argv, &dir);
    if (st)
        return st < 0 ? 0 : st;
    const char *out = A.out;
    trace_synth pin;
    trace_synth_defaults(&pin);
    if (A.have_sinks)
        pin.n_sinks = A.sinks;
    errbuf e = {{0}};
    trace *t = NULL;
    trace_synth p;
    trace_stats stats;
    int rc = trace_open(dir, &t, &e);
    if (rc == MS_OK)
        rc = trace_fit(t, &pin, &p, &stats, &e);
    trace_close(t);
    if (rc != MS_OK)
        return fail(rc, &e);
    printf("# fitted from %s\n", dir);
    print_stats(&stats);
    trace_synth_write_yaml(&p, stdout);
    if (out) {
        FILE *f = fopen(out, "w");
        if (f) {
            fprintf(f, "# fitted from %s by 'mpcsim trace fit'\n", dir);
            trace_synth_write_yaml(&p, f);
        }
        if (!f || fclose(f) != 0) {
            cli_error("trace", "%s: cannot write", out);
            return 1;
        }
    }
    return 0;
}

static int cmd_info(int argc, char **argv)
{
    A = (trace_args){.tol = 1e-4};
    const char *dir;
    int st = parse_sub(&info_cmd, argc, argv, &dir);
    if (st)
        return st < 0 ? 0 : st;
    int verify = A.verify;
    double tol = A.tol;
    errbuf e = {{0}};
    trace *t = NULL;
    int rc = trace_open(dir, &t, &e);
    if (rc != MS_OK)
        return fail(rc, &e);
    const trace_shape *s = trace_get_shape(t);
    printf("trace:      %s\n", dir);
    printf("format:     %s %d\n", TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION);
    printf("model:      %s\n", trace_model_name(t));
    printf("source:     %s\n", trace_source_name(t));
    printf("q/k order:  %s%s\n", trace_rope_layout(t),
           strcmp(trace_rope_layout(t), "half") ? "" : " (converted to interleaved on read)");
    printf("shape:      layers %u, heads %u, kv_heads %u, head_dim %u, dim %u, ffn_dim %u, "
           "vocab %u\n",
           s->n_layers, s->n_heads, s->n_kv_heads, s->head_dim, s->dim, s->ffn_dim, s->vocab);
    printf("tokens:     %u\n", s->n_tokens);
    printf("arrays:    ");
    for (int a = 0; a < TRACE_N_ARRAYS; a++)
        if (trace_has(t, (trace_array)a))
            printf(" %s", trace_array_name((trace_array)a));
    printf("\n");
    const int32_t *ids = trace_tokens(t);
    if (ids) {
        printf("first ids: ");
        for (uint32_t i = 0; i < s->n_tokens && i < 16; i++)
            printf(" %d", ids[i]);
        printf("%s\n", s->n_tokens > 16 ? " …" : "");
    }
    if (verify) {
        trace_check ck;
        fflush(stdout);
        rc = trace_verify(t, dir, tol, &ck, &e);
        if (rc != MS_OK) {
            trace_close(t);
            return fail(rc, &e);
        }
        printf("verify:     ok (tolerance %g)\n", tol);
        printf("  finite:   %llu values\n", (unsigned long long)ck.values);
        if (ck.att_rows)
            printf("  att:      %llu stored rows = softmax(q·k/√d), max |diff| %.2g\n",
                   (unsigned long long)ck.att_rows, ck.att_err);
        else
            printf("  att:      not stored (rows are computed from q and k)\n");
        if (ck.model_pos)
            printf("  model:    q, k, v, ffn, logits = %s's forward pass at %u positions, "
                   "max rel. diff %.2g\n",
                   trace_model_name(t), ck.model_pos, ck.model_err);
        else
            printf("  model:    not compared (%s)\n", ck.model_note);
    }
    trace_close(t);
    return 0;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "record"))
        return cmd_record(argc - 1, argv + 1);
    if (!strcmp(sub, "synth"))
        return cmd_synth(argc - 1, argv + 1);
    if (!strcmp(sub, "fit"))
        return cmd_fit(argc - 1, argv + 1);
    if (!strcmp(sub, "info"))
        return cmd_info(argc - 1, argv + 1);
    static const char *const subs[] = {"record", "synth", "fit", "info"};
    const char *dym = did_you_mean(sub, subs, 4);
    cli_error("trace", "unknown subcommand '%s'%s%s%s", sub, dym ? " (did you mean '" : "",
              dym ? dym : "", dym ? "'?)" : "");
    return 2;
}

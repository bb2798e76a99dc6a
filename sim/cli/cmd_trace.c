/* cmd_trace.c — `mpcsim trace record|synth|fit|info`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sim/trace/trace.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim trace record --model NAME --text FILE [--max-tokens N] -o DIR\n"
            "       mpcsim trace synth --model NAME --tokens T [--seed S] [--params FILE]\n"
            "                          [--set KEY=VALUE]... (-o DIR | --stats)\n"
            "       mpcsim trace fit DIR [--sinks N] [-o params.yaml]\n"
            "       mpcsim trace info DIR [--verify [--tol X]]\n\n"
            "record  runs the float reference of a model with weights (stories260K) over a\n"
            "        text and writes q, k, v, att, ffn, logits, wo and tokens (.npy + manifest)\n"
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
            "  generator\n"
            "  (sim/trace/TRACE_FORMAT.md explains each)\n");
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

static int parse_u32(const char *opt, const char *s, uint32_t *out)
{
    unsigned long long v;
    if (parse_u64(s, &v) || v > UINT32_MAX) {
        cli_error("trace", "%s expects a non-negative integer, got '%s'", opt, s);
        return 2;
    }
    *out = (uint32_t)v;
    return 0;
}

/* ---- record --------------------------------------------------------------------------- */

static int cmd_record(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"text", required_argument, 0, 't'},
                                         {"max-tokens", required_argument, 0, 'n'},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = "stories260K", *text = NULL, *out = NULL;
    uint32_t max_tokens = 256;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:n:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': text = optarg; break;
        case 'n':
            if (parse_u32("--max-tokens", optarg, &max_tokens))
                return 2;
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!text || !out || max_tokens == 0) {
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
           "%.4f)\n", st->sparsity, st->sparsity_min_layer);
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
    int rc = trace_writer_open(dir, s, trace_model_name(t), trace_is_synthetic(t) ? "synth"
                               : "copy", arrays, &w, e);
    if (rc != MS_OK)
        return rc;
    const trace_synth *sp = trace_synth_params(t);
    if (sp) {
        char seed[32], params[512];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)trace_seed(t));
        snprintf(params, sizeof params, "{sink: %.9g, n_sinks: %u, local: %.9g, window: %.9g, "
                 "heavy: %.9g, heavy_frac: %.9g, layer_sim: %.9g, drift: %.9g, noise: %.9g, "
                 "ffn_sparsity: %.9g, generator: %u}", sp->sink, sp->n_sinks, sp->local,
                 sp->window, sp->heavy, sp->heavy_frac, sp->layer_sim, sp->drift, sp->noise,
                 sp->ffn_sparsity, sp->generator);
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
            rc = trace_writer_row(w, l, p, trace_q(t, l), k, v, trace_att(t, l),
                                  trace_ffn(t, l));
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
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"tokens", required_argument, 0, 'T'},
                                         {"seed", required_argument, 0, 's'},
                                         {"params", required_argument, 0, 'p'},
                                         {"set", required_argument, 0, 'S'},
                                         {"stats", no_argument, 0, 'x'},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *out = NULL;
    uint32_t T = 0;
    unsigned long long seed = 1;
    int stats = 0, c;
    /* --params and --set apply in the order given, on top of the model family's defaults:
     * they are kept until the model is known */
    const char *given[64];
    char kinds[64];
    size_t n_given = 0;
    trace_synth p;
    errbuf e = {{0}};
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:T:s:p:S:xo:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'T':
            if (parse_u32("--tokens", optarg, &T))
                return 2;
            break;
        case 's':
            if (parse_u64(optarg, &seed)) {
                cli_error("trace", "--seed expects an unsigned integer, got '%s'", optarg);
                return 2;
            }
            break;
        case 'p':
        case 'S':
            if (c == 'S' && !strchr(optarg, '=')) {
                cli_error("trace", "--set expects KEY=VALUE, got '%s'", optarg);
                return 2;
            }
            if (n_given == sizeof given / sizeof given[0]) {
                cli_error("trace", "at most %zu --params/--set options", n_given);
                return 2;
            }
            kinds[n_given] = (char)c;
            given[n_given++] = optarg;
            break;
        case 'x': stats = 1; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model || T == 0 || (!out && !stats)) {
        cli_error("trace", "synth needs --model NAME, --tokens T > 0 and -o DIR or --stats");
        return 2;
    }
    model_cfg cfg;
    trace *t = NULL;
    int rc = model_load(model, &cfg, &e);
    if (rc == MS_OK)
        trace_synth_defaults_for(&p, cfg.family);
    for (size_t i = 0; rc == MS_OK && i < n_given; i++) {
        if (kinds[i] == 'p') {
            rc = trace_synth_read_yaml(&p, given[i], &e);
        } else {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", given[i]);
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
        trace_stats st;
        trace_synth fitted;
        rc = trace_fit(t, &p, &fitted, &st, &e);
        if (rc == MS_OK) {
            printf("# synthetic %s, %u tokens, seed %llu\n", cfg.name, T, seed);
            print_stats(&st);
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
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"sinks", required_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL;
    trace_synth pin;
    trace_synth_defaults(&pin);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:k:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'k':
            if (parse_u32("--sinks", optarg, &pin.n_sinks))
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        cli_error("trace", "fit needs exactly one trace directory");
        return 2;
    }
    errbuf e = {{0}};
    trace *t = NULL;
    trace_synth p;
    trace_stats st;
    int rc = trace_open(argv[optind], &t, &e);
    if (rc == MS_OK)
        rc = trace_fit(t, &pin, &p, &st, &e);
    trace_close(t);
    if (rc != MS_OK)
        return fail(rc, &e);
    printf("# fitted from %s\n", argv[optind]);
    print_stats(&st);
    trace_synth_write_yaml(&p, stdout);
    if (out) {
        FILE *f = fopen(out, "w");
        if (f) {
            fprintf(f, "# fitted from %s by 'mpcsim trace fit'\n", argv[optind]);
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
    static const struct option opts[] = {{"verify", no_argument, 0, 'v'},
                                         {"tol", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int verify = 0, c;
    double tol = 1e-4;
    optind = 1;
    while ((c = getopt_long(argc, argv, "vt:h", opts, NULL)) != -1) {
        switch (c) {
        case 'v': verify = 1; break;
        case 't':
            if (parse_double(optarg, &tol) || !(tol > 0) || tol > 1) {
                cli_error("trace", "--tol expects a number in (0, 1], got '%s'", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc) {
        cli_error("trace", "info needs exactly one trace directory");
        return 2;
    }
    const char *dir = argv[optind];
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
           "vocab %u\n", s->n_layers, s->n_heads, s->n_kv_heads, s->head_dim, s->dim,
           s->ffn_dim, s->vocab);
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
                   "max rel. diff %.2g\n", trace_model_name(t), ck.model_pos, ck.model_err);
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

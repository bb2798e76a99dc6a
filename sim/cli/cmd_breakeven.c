/* cmd_breakeven.c — `mpcsim breakeven`: where a policy pays off. Each policy's steady decode
 * step is replayed, lowered and costed once (run_decode_program), then simulated on every point
 * of a threads × latency × bandwidth grid against the full cache's step; the speed-up map goes
 * to a table, a data file and a gnuplot heatmap with the break-even contour. A scenario whose
 * protocol is a list (compat: native and spu) is one such comparison per protocol, each
 * against its own full cache, then the policies' maps side by side.
 *
 * Only the simulation is repeated per point: bytes, rounds and local work do not depend on the
 * network or the core count (tests/check_sim.c, "bytes independent of network"), so one costed
 * program per policy serves the whole grid exactly as separate runs would. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "gnuplot.h"
#include "opt.h"
#include "protocols/base/datadir.h"
#include "sim/engine/simulate.h"
#include "sim/scenario/runlabel.h"
#include "sim/scenario/runner.h"
#include "sim/scenario/scn.h"

#define BE_AXIS_MAX 32

typedef struct be_axis {
    double v[BE_AXIS_MAX]; /* bandwidth in bit/s, latency in ns, threads */
    int n;
} be_axis;

typedef struct be_args {
    const char *scenario, *outdir;
    be_axis bw, lat, th;
    int svg, no_plot, ops; /* ops: print the step's N costliest ops (by bytes) */
} be_args;

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim breakeven SCENARIO.yaml [-o DIR] [--bandwidth LIST]\n"
               "                        [--latency LIST] [--threads LIST] [--svg] [--no-plot]\n"
               "                        [--ops N]\n\n"
               "Where a policy pays off. The scenario's runs are one with policy 'full' (the\n"
               "reference) and the policies to compare, everything else equal (of the scenario's\n"
               "network only the wire framing is kept). For each policy the last\n"
               "decode step of the workload (the steady step: a one-time compaction before it is\n"
               "not in it) is costed once, then simulated on every point of the grid of threads\n"
               "(the scenario's machine with that many cores) × one-way latency × bandwidth\n"
               "(every link the same), and compared with the full cache's step on the same\n"
               "point. A protocol list (e.g. compat: native and spu) gives each protocol its\n"
               "own reference and maps, and a side-by-side summary of each policy's maps.\n\n"
               "Prints the speed-up (full step latency / policy step latency) per point, writes\n"
               "DIR/breakeven-N-POLICY.dat and, with gnuplot, DIR/breakeven-N-POLICY.png: a\n"
               "heatmap per thread count, red where the policy is slower, blue where it wins,\n"
               "and the break-even contour (speed-up 1).\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "example:\n"
               "  mpcsim breakeven scenarios/breakeven-7b.yaml -o results/breakeven\n");
}

static int p_rate(const char *s, double *v) { return net_rate_bps(s, v); }

/* "a,b,c" → axis values through parse. */
static int parse_list(const char *opt, const char *s, be_axis *a,
                      int (*parse)(const char *, double *), errbuf *e)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    a->n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (a->n == BE_AXIS_MAX)
            return err_set(e, MS_ERR_USAGE, "%s: at most %d values", opt, BE_AXIS_MAX);
        if (parse(t, &a->v[a->n]))
            return err_set(e, MS_ERR_USAGE, "%s: bad value '%s'%s%s", opt, t,
                           parse == p_rate ? ": " : "", parse == p_rate ? net_rate_why(t) : "");
        a->n++;
    }
    if (!a->n)
        return err_set(e, MS_ERR_USAGE, "%s: an empty list", opt);
    return MS_OK;
}

static int p_lat(const char *s, double *v)
{
    uint64_t ns;
    if (net_time_ns(s, &ns))
        return -1;
    *v = (double)ns;
    return 0;
}

static int p_threads(const char *s, double *v)
{
    long long t;
    if (parse_i64(s, &t) || t < 1 || t > 4096)
        return -1;
    *v = (double)t;
    return 0;
}

static int take_bw(const cli_opt *o, const char *arg, errbuf *e)
{
    return parse_list("--bandwidth", arg, o->dest, p_rate, e);
}

static int take_lat(const cli_opt *o, const char *arg, errbuf *e)
{
    return parse_list("--latency", arg, o->dest, p_lat, e);
}

static int take_threads(const cli_opt *o, const char *arg, errbuf *e)
{
    return parse_list("--threads", arg, o->dest, p_threads, e);
}

/* 0 ok, -1 --help printed, 2 usage error (printed). */
static int parse_args(int argc, char **argv, be_args *a)
{
    memset(a, 0, sizeof *a);
    a->outdir = "results/breakeven";
    errbuf e;
    parse_list("--bandwidth", "100Mbps,200Mbps,500Mbps,1Gbps,2Gbps,5Gbps,10Gbps,20Gbps", &a->bw,
               p_rate, &e);
    parse_list("--latency", "0.05ms,0.1ms,0.2ms,0.5ms,1ms,2ms,5ms,10ms,20ms,50ms", &a->lat, p_lat,
               &e);
    parse_list("--threads", "1,16,64", &a->th, p_threads, &e);
    const cli_opt opts[] = {
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &a->outdir,
         .arg = "DIR",
         .help = "where the files go (default: results/breakeven)"},
        {.name = "bandwidth",
         .kind = CLI_FN,
         .dest = &a->bw,
         .arg = "LIST",
         .fn = take_bw,
         .help = "comma-separated rates, e.g. 100Mbps,1Gbps (default:\n"
                 "100Mbps 200Mbps 500Mbps 1Gbps 2Gbps 5Gbps 10Gbps 20Gbps)"},
        {.name = "latency",
         .kind = CLI_FN,
         .dest = &a->lat,
         .arg = "LIST",
         .fn = take_lat,
         .help = "comma-separated one-way latencies, e.g. 0.1ms,20ms\n"
                 "(default: 0.05 0.1 0.2 0.5 1 2 5 10 20 50 ms)"},
        {.name = "threads",
         .kind = CLI_FN,
         .dest = &a->th,
         .arg = "LIST",
         .fn = take_threads,
         .help = "cores per party, e.g. 1,16,64 (default: 1,16,64)"},
        {.name = "svg", .kind = CLI_FLAG, .dest = &a->svg, .help = "SVG instead of PNG"},
        {.name = "no-plot",
         .kind = CLI_FLAG,
         .dest = &a->no_plot,
         .help = "tables and data files only"},
        {.name = "ops",
         .kind = CLI_INT,
         .dest = &a->ops,
         .arg = "N",
         .lo = 1,
         .hi = 4096,
         .want = "a count 1..4096",
         .help = "also print each step's N costliest ops by online bytes\n"
                 "(ops of the same name in every layer summed)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"breakeven", opts, sizeof opts / sizeof opts[0], 24, 2};
    int rc = cli_parse_one(&cmd, argc, argv, &a->scenario, "which scenario?",
                           "one scenario at a time", usage);
    return rc == CLI_HELP_ASKED ? -1 : rc;
}

/* The parts of a run that must match the reference's: everything but the policy. */
static int same_setting(const run_cfg *a, const run_cfg *b)
{
    return !strcmp(a->model.name, b->model.name) && a->model.n_layers == b->model.n_layers &&
           !strcmp(a->proto_ref, b->proto_ref) && !memcmp(&a->work, &b->work, sizeof a->work) &&
           !memcmp(&a->proto, &b->proto, sizeof a->proto);
}

/* One line of the op table: ops whose output names agree once the layer number is dropped. */
typedef struct be_opsum {
    char name[64];
    int kind, cat;
    uint64_t rounds, bytes;
} be_opsum;

static int cmp_opsum(const void *a, const void *b)
{
    const be_opsum *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* An op's output name with its layer number dropped: the digits after an 'L' become one '#'
 * ("L3.kcache" → "L#.kcache"), so the same op of every layer shares one line. */
static void be_op_name(const char *src, char *nm, size_t n)
{
    size_t k = 0;
    for (const char *c = src; *c && k + 1 < n; c++) {
        int digit = *c >= '0' && *c <= '9';
        if (digit && k && (nm[k - 1] == 'L' || nm[k - 1] == '#')) {
            if (nm[k - 1] == 'L')
                nm[k++] = '#';
            continue;
        }
        nm[k++] = *c;
    }
    nm[k] = '\0';
}

/* Prints the step's n costliest op names by online bytes (all parties), with their rounds. */
static void be_ops(const op_program *p, const cost_log *l, int n, const char *label)
{
    be_opsum *s = calloc(p->n_ops + 1, sizeof *s);
    uint32_t *slot = calloc(p->n_ops + 1, sizeof *slot);
    size_t ns = 0;
    uint64_t total = 0;
    if (!s || !slot) {
        free(s);
        free(slot);
        return;
    }
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        char nm[64];
        be_op_name(o->out < p->n_tens ? p->tens[o->out].name : "?", nm, sizeof nm);
        size_t j = 0;
        while (j < ns && (strcmp(s[j].name, nm) || s[j].kind != o->kind))
            j++;
        if (j == ns) {
            snprintf(s[ns].name, sizeof s[ns].name, "%s", nm);
            s[ns].kind = o->kind;
            s[ns].cat = o->cat;
            ns++;
        }
        slot[i] = (uint32_t)j;
    }
    for (size_t r = 0; r < l->n; r++) {
        const cost_round *cr = &l->r[r];
        if (cr->op >= p->n_ops)
            continue;
        be_opsum *x = &s[slot[cr->op]];
        x->rounds += cr->comm;
        for (int q = 0; q < l->n_parties; q++)
            for (int d = 0; d < l->n_parties; d++)
                if (q != d) {
                    x->bytes += cr->bytes[q][d];
                    total += cr->bytes[q][d];
                }
    }
    qsort(s, ns, sizeof *s, cmp_opsum);
    printf("\n%s: the step's costliest ops (%.4g MB online in all)\n", label, total / 1e6);
    printf("  %-28s %-10s %-10s %8s %11s %6s\n", "op (output)", "kind", "category", "rounds", "MB",
           "share");
    for (size_t j = 0; j < ns && j < (size_t)n; j++)
        printf("  %-28.28s %-10.10s %-10.10s %8llu %11.4g %5.1f%%\n", s[j].name,
               op_kind_name(s[j].kind), op_cat_name(s[j].cat), (unsigned long long)s[j].rounds,
               s[j].bytes / 1e6, total ? 100.0 * (double)s[j].bytes / (double)total : 0);
    free(s);
    free(slot);
}

/* A costed steady decode step. */
typedef struct be_step {
    op_program prog;
    cost_log log;
} be_step;

/* The step's latency on (threads, latency, bandwidth). */
static int be_latency(const run_cfg *c, be_step *s, int threads, uint64_t lat_ns, double bps,
                      sim_ws *ws, uint64_t *out, errbuf *e)
{
    net_cfg n = c->net;
    net_uniform(&n, c->net.n_parties, lat_ns, bps);
    n.wire = c->net.wire;
    machine_profile m = c->machine;
    m.threads = threads;
    sim_opts o = {.overlap = c->overlap, .ws = ws};
    sim_result r;
    int rc = sim_run(&n, &m, &s->prog, &s->log, &o, &r, e);
    if (rc == MS_OK) {
        *out = r.latency_ns;
        sim_result_free(&r);
    }
    return rc;
}

/* Where point (thread index t, latency index l, bandwidth index b) is in a grid of results. */
static size_t be_at(const be_args *a, int t, int l, int b)
{
    return ((size_t)t * a->lat.n + l) * a->bw.n + b;
}

/* The data file: a block per thread count, a line per latency, a row per bandwidth. */
static int be_write_data(const be_args *a, const char *dat, const double *speedup,
                         const char *label)
{
    FILE *f = fopen(dat, "w");
    if (!f) {
        cli_error("breakeven", "cannot write %s: %s", dat, strerror(errno));
        return 1;
    }
    fprintf(f, "# %s vs full: decode-step speed-up; blocks: threads", label);
    for (int t = 0; t < a->th.n; t++)
        fprintf(f, " %g", a->th.v[t]);
    fprintf(f, "\n# bandwidth_mbps latency_ms log2_speedup speedup\n");
    for (int t = 0; t < a->th.n; t++) {
        if (t)
            fputs("\n\n", f);
        for (int l = 0; l < a->lat.n; l++) {
            if (l)
                fputc('\n', f);
            for (int b = 0; b < a->bw.n; b++) {
                double s = speedup[be_at(a, t, l, b)];
                fprintf(f, "%g %g %.6g %.6g\n", a->bw.v[b] / 1e6, a->lat.v[l] / 1e6, log2(s), s);
            }
        }
    }
    if (fclose(f)) {
        cli_error("breakeven", "cannot write %s", dat);
        return 1;
    }
    printf("%s\n", dat);
    return 0;
}

/* Thread count t's panel title: the machine, the cores, and whether the policy wins or loses
 * on every point of it. */
static void be_panel_title(const be_args *a, const run_cfg *ref, const double *speedup, int t,
                           char *out, size_t n)
{
    size_t per = (size_t)a->lat.n * a->bw.n, lose = 0, win = 0;
    for (size_t k = 0; k < per; k++) {
        lose += speedup[t * per + k] < 1;
        win += speedup[t * per + k] > 1;
    }
    snprintf(out, n, "machine %s, %g thread%s%s", ref->machine.name, a->th.v[t],
             a->th.v[t] == 1 ? "" : "s",
             lose == per  ? ": slower everywhere"
             : win == per ? ": faster everywhere"
                          : "");
}

/* The variable file scripts/breakeven.gp reads: terminal, files, titles, colour range. */
static int be_write_vars(const be_args *a, const run_cfg *ref, const char *vars, const char *dat,
                         const char *img, const double *speedup, const char *label)
{
    double mx = 1;
    size_t np = (size_t)a->th.n * a->lat.n * a->bw.n;
    for (size_t i = 0; i < np; i++)
        mx = fmax(mx, fabs(log2(speedup[i])));
    FILE *f = fopen(vars, "w");
    if (!f) {
        cli_error("breakeven", "cannot write %s: %s", vars, strerror(errno));
        return 1;
    }
    char title[1024], s[256], pl[256];
    run_label_protocol(&ref->proto, pl, sizeof pl);
    /* two lines: a protocol and a policy with their options do not fit one panel's width */
    snprintf(title, sizeof title, "%s vs the full cache\n%s %s, decode at KV %u", label,
             ref->model.name, pl, ref->work.prompt_len + ref->work.decode_len - 1);
    gnuplot_var_line(f, "term_name", a->svg ? "svg" : "pngcairo");
    gnuplot_var_line(f, "outfile", img);
    snprintf(s, sizeof s, "%s/scripts", mpcsim_datadir());
    gnuplot_var_line(f, "scriptdir", s);
    gnuplot_var_line(f, "datafile", dat);
    gnuplot_var_line(f, "title_text", title);
    fprintf(f, "n_panels = %d\ncb_max = %g\narray panel_titles[%d]\n", a->th.n,
            fmin(4, ceil(mx * 2) / 2), a->th.n);
    for (int t = 0; t < a->th.n; t++) {
        char name[32];
        be_panel_title(a, ref, speedup, t, s, sizeof s);
        snprintf(name, sizeof name, "panel_titles[%d]", t + 1);
        gnuplot_var_line(f, name, s);
    }
    if (fclose(f)) {
        cli_error("breakeven", "cannot write %s", vars);
        return 1;
    }
    return 0;
}

/* gnuplot on the variable file and scripts/breakeven.gp; its messages kept in log on failure. */
static int be_render(const char *vars, const char *log, const char *img)
{
    char script[PATH_MAX];
    snprintf(script, sizeof script, "%s/scripts/breakeven.gp", mpcsim_datadir());
    const char *files[] = {vars, script};
    if (gnuplot_run(NULL, files, 2, log)) {
        cli_error("breakeven", "gnuplot failed on %s (messages in %s)", script, log);
        return 1;
    }
    unlink(vars);
    unlink(log);
    printf("%s\n", img);
    return 0;
}

/* Writes DIR/breakeven-IDX-POLICY.dat and, unless --no-plot, renders it. 0, or 1 on a
 * failure (said). */
static int be_plot(const be_args *a, const run_cfg *ref, const run_cfg *c, int idx,
                   const double *speedup, const char *label)
{
    char base[PATH_MAX], dat[PATH_MAX + 8], vars[PATH_MAX + 8], img[PATH_MAX + 8],
        log[PATH_MAX + 8];
    char slug[64];
    int prof = c->proto.compat[0] && strcmp(c->proto.compat, "native");
    snprintf(slug, sizeof slug, "%s%s%s", c->policy.name, prof ? "-" : "",
             prof ? c->proto.compat : ""); /* compat: native and spu side by side */
    snprintf(base, sizeof base, "%s/breakeven-%d-%s", a->outdir, idx, slug);
    snprintf(dat, sizeof dat, "%s.dat", base);
    if (be_write_data(a, dat, speedup, label))
        return 1;
    if (a->no_plot)
        return 0;
    snprintf(vars, sizeof vars, "%s.vars.gp", base);
    snprintf(img, sizeof img, "%s.%s", base, a->svg ? "svg" : "png");
    snprintf(log, sizeof log, "%s.log", base);
    if (be_write_vars(a, ref, vars, dat, img, speedup, label))
        return 1;
    return be_render(vars, log, img);
}

/* The table: one line per latency, one column per bandwidth, for one thread count. */
static void be_table(const be_args *a, const double *speedup, int t)
{
    printf("  threads %g — speed-up by one-way latency (rows, ms) × bandwidth (columns,\n"
           "  M: Mbit/s, G: Gbit/s):\n",
           a->th.v[t]);
    printf("  %8s", "ms \\ bw");
    for (int b = 0; b < a->bw.n; b++) { /* "10G": 10 Gbit/s, "100M": 100 Mbit/s */
        double v = a->bw.v[b];
        char h[16];
        if (v >= 1e9)
            snprintf(h, sizeof h, "%gG", v / 1e9);
        else
            snprintf(h, sizeof h, "%gM", v / 1e6);
        printf(" %6s", h);
    }
    putchar('\n');
    for (int l = 0; l < a->lat.n; l++) {
        printf("  %8g", a->lat.v[l] / 1e6);
        for (int b = 0; b < a->bw.n; b++)
            printf(" %6.2f", speedup[((size_t)t * a->lat.n + l) * a->bw.n + b]);
        putchar('\n');
    }
}

/* The same model and workload, the protocol aside: the reference runs of a protocol sweep
 * (compat: native and spu side by side) may differ in nothing else. */
static int same_but_protocol(const run_cfg *a, const run_cfg *b)
{
    return !strcmp(a->model.name, b->model.name) && a->model.n_layers == b->model.n_layers &&
           !memcmp(&a->work, &b->work, sizeof a->work);
}

#define BE_GROUPS_MAX 8

/* The scenario's runs with policy 'full' (one per protocol of the scenario's protocol axis,
 * e.g. compat: native and spu), once every other run is checked to match exactly one of them
 * in everything but its policy: their count into *n_ref (0 with the error printed). */
static size_t be_references(const scenario *sc, const char *path, const run_cfg **ref)
{
    size_t n_ref = 0;
    for (size_t i = 0; i < sc->n_runs; i++)
        if (!strcmp(sc->runs[i].policy.name, "full")) {
            int clash = n_ref >= BE_GROUPS_MAX;
            for (size_t g = 0; g < n_ref; g++)
                clash |=
                    same_setting(&sc->runs[i], ref[g]) || !same_but_protocol(&sc->runs[i], ref[g]);
            if (clash) {
                cli_error(
                    "breakeven",
                    "%s: the runs with policy 'full' repeat a protocol or differ in more than it\n"
                    "---> HINT: one reference per protocol (a protocol list, e.g. "
                    "compat: native and spu) and the policies to compare; sweep other keys "
                    "in separate files",
                    path);
                return 0;
            }
            ref[n_ref++] = &sc->runs[i];
        }
    if (!n_ref || sc->n_runs < 2 * n_ref) {
        cli_error("breakeven",
                  "%s: the runs need policy 'full' (the reference) and at least one "
                  "other policy",
                  path);
        return 0;
    }
    for (size_t i = 0; i < sc->n_runs; i++) {
        size_t m = 0;
        for (size_t g = 0; g < n_ref; g++)
            m += same_setting(&sc->runs[i], ref[g]);
        if (m != 1) {
            cli_error("breakeven",
                      "%s: run %zu (%s) differs from the full-cache run in more "
                      "than its policy",
                      path, i, sc->runs[i].policy.name);
            return 0;
        }
    }
    return n_ref;
}

/* c's decode step (costed once, into st) simulated on every grid point: out[k] with
 * k = (thread index × latencies + latency index) × bandwidths + bandwidth index. what names
 * the step in the progress line, label in the costliest ops' heading. */
static int be_grid(const be_args *a, const run_cfg *c, const char *what, const char *label,
                   be_step *st, sim_ws *ws, uint64_t *out, errbuf *e)
{
    fprintf(stderr, "mpcsim breakeven: costing %s …\n", what);
    int rc = run_decode_program(c, &st->prog, &st->log, e);
    if (rc)
        return rc;
    if (a->ops)
        be_ops(&st->prog, &st->log, a->ops, label);
    for (int t = 0; t < a->th.n; t++)
        for (int l = 0; l < a->lat.n; l++)
            for (int b = 0; b < a->bw.n; b++) {
                size_t k = ((size_t)t * a->lat.n + l) * a->bw.n + b;
                if ((rc = be_latency(c, st, (int)a->th.v[t], (uint64_t)a->lat.v[l], a->bw.v[b], ws,
                                     &out[k], e)))
                    return rc;
            }
    return MS_OK;
}

/* The grids a comparison needs: the reference's and a policy's step latencies, the speed-ups,
 * the simulator's workspace and the costed step. */
typedef struct be_work {
    size_t np; /* grid points */
    size_t n_sum;
    struct be_sum {
        const run_cfg *ref, *c;
        double lo, hi;
        size_t wins;
    } sum[BE_GROUPS_MAX * 32]; /* per compared run: the range of its map, for the summary */
    uint64_t *t_ref, *t_pol;
    double *speedup;
    sim_ws *ws;
    be_step st;
} be_work;

static int be_work_init(be_work *w, const be_args *a, int n_parties)
{
    w->np = (size_t)a->th.n * a->lat.n * a->bw.n;
    w->t_ref = calloc(w->np, sizeof *w->t_ref);
    w->t_pol = calloc(w->np, sizeof *w->t_pol);
    w->speedup = calloc(w->np, sizeof *w->speedup);
    w->ws = sim_ws_new();
    op_program_init(&w->st.prog);
    cost_log_init(&w->st.log, n_parties);
    return w->t_ref && w->t_pol && w->speedup && w->ws ? 0 : -1;
}

static void be_work_free(be_work *w)
{
    op_program_free(&w->st.prog);
    cost_log_free(&w->st.log);
    sim_ws_free(w->ws);
    free(w->t_ref);
    free(w->t_pol);
    free(w->speedup);
}

/* Policy run c against the reference's step latencies on the grid: the speed-up map printed,
 * written and plotted (file index idx). MS_OK, with *status |= 1 when a file was not written;
 * else the costing's error code (message in e). */
static int be_compare(const be_args *a, const run_cfg *ref, const run_cfg *c, int idx, be_work *w,
                      int *status, errbuf *e)
{
    char label[256];
    run_label_policy_words(c, label, sizeof label);
    int rc = be_grid(a, c, label, label, &w->st, w->ws, w->t_pol, e);
    if (rc)
        return rc;
    size_t wins = 0;
    for (size_t k = 0; k < w->np; k++) {
        w->speedup[k] = w->t_pol[k] ? (double)w->t_ref[k] / (double)w->t_pol[k] : 1;
        wins += w->speedup[k] > 1;
    }
    printf("\n%s vs full: faster on %zu of %zu points\n", label, wins, w->np);
    if (w->n_sum < sizeof w->sum / sizeof *w->sum) {
        struct be_sum *m = &w->sum[w->n_sum++];
        *m = (struct be_sum){ref, c, w->speedup[0], w->speedup[0], wins};
        for (size_t k = 1; k < w->np; k++)
            m->lo = fmin(m->lo, w->speedup[k]), m->hi = fmax(m->hi, w->speedup[k]);
    }
    for (int t = 0; t < a->th.n; t++)
        be_table(a, w->speedup, t);
    *status |= be_plot(a, ref, c, idx, w->speedup, label);
    return MS_OK;
}

/* The reference costed on the grid and its setting printed, then every run of its setting
 * compared (file indices from *idx on). */
static int be_run(const be_args *a, const scenario *sc, const run_cfg *ref, be_work *w, int *idx,
                  int *status, errbuf *e)
{
    int rc = be_grid(a, ref, "the full cache's step", "full", &w->st, w->ws, w->t_ref, e);
    if (rc)
        return rc;
    char pl[256];
    run_label_protocol(&ref->proto, pl, sizeof pl);
    printf("%s: %s %s, decode step at KV %u (the workload's last), machine %s\n", sc->name,
           ref->model.name, pl, ref->work.prompt_len + ref->work.decode_len - 1, ref->machine.name);
    for (size_t i = 0; i < sc->n_runs && !rc; i++)
        if (&sc->runs[i] != ref && same_setting(&sc->runs[i], ref))
            rc = be_compare(a, ref, &sc->runs[i], (*idx)++, w, status, e);
    return rc;
}

/* With more than one protocol (compat: native and spu): each policy's maps side by side, the
 * range of the speed-up over the grid and the points where it wins, one column per protocol. */
/* line printed without its trailing blanks. */
static void be_line(char *line)
{
    size_t k = strlen(line);
    while (k && line[k - 1] == ' ')
        line[--k] = '\0';
    puts(line);
}

static void be_side_by_side(const be_work *w, const run_cfg *const *ref, size_t n_ref)
{
    char line[1024];
    size_t k = (size_t)snprintf(line, sizeof line, "  %-34s", "policy");
    for (size_t g = 0; g < n_ref && k < sizeof line; g++) {
        char pl[256];
        run_label_protocol(&ref[g]->proto, pl, sizeof pl);
        k += (size_t)snprintf(line + k, sizeof line - k, " %-24.24s", pl);
    }
    printf("\nside by side: decode-step speed-up over the grid, min-max (points faster)\n");
    be_line(line);
    for (size_t i = 0; i < w->n_sum; i++) {
        if (w->sum[i].ref != ref[0])
            continue;
        char label[256];
        run_label_policy_words(w->sum[i].c, label, sizeof label);
        k = (size_t)snprintf(line, sizeof line, "  %-34.34s", label);
        for (size_t g = 0; g < n_ref; g++)
            for (size_t j = 0; j < w->n_sum && k < sizeof line; j++) {
                char lj[256];
                run_label_policy_words(w->sum[j].c, lj, sizeof lj);
                if (w->sum[j].ref != ref[g] || strcmp(lj, label))
                    continue;
                char cell[64];
                snprintf(cell, sizeof cell, "%.2f-%.2f (%zu/%zu)", w->sum[j].lo, w->sum[j].hi,
                         w->sum[j].wins, w->np);
                k += (size_t)snprintf(line + k, sizeof line - k, " %-24s", cell);
                break;
            }
        be_line(line);
    }
}

/* The loaded scenario's comparison: the exit status. */
static int be_main(const be_args *a, const scenario *sc)
{
    const run_cfg *ref[BE_GROUPS_MAX];
    size_t n_ref = be_references(sc, a->scenario, ref);
    if (!n_ref)
        return 2;
    if (cli_mkdir_p(a->outdir)) {
        cli_error("breakeven", "cannot create %s: %s", a->outdir, strerror(errno));
        return 1;
    }
    be_work *w = calloc(1, sizeof *w);
    errbuf e;
    int rc = MS_OK, status = 0, idx = 0;
    if (!w || be_work_init(w, a, ref[0]->net.n_parties)) {
        cli_error("breakeven", "out of memory");
        status = 1;
    } else {
        for (size_t g = 0; g < n_ref && !rc; g++) {
            if (g)
                putchar('\n');
            rc = be_run(a, sc, ref[g], w, &idx, &status, &e);
        }
        if (rc)
            status = cli_fail("breakeven", rc, e.msg);
        else if (n_ref > 1)
            be_side_by_side(w, ref, n_ref);
    }
    if (w)
        be_work_free(w);
    free(w);
    return status;
}

int cmd_breakeven(int argc, char **argv)
{
    be_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    scenario sc;
    errbuf e;
    if ((rc = scn_load(a.scenario, NULL, &sc, &e))) {
        fprintf(stderr, "%s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    int status = be_main(&a, &sc);
    scn_free(&sc);
    return status;
}

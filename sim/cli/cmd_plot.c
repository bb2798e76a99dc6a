/* cmd_plot.c — `mpcsim plot`: SQL queries → temp .dat files → the gnuplot scripts in
 * <datadir>/scripts/ → PNG (pngcairo, else png) or SVG images. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "gnuplot.h"
#include "models/model.h"
#include "results/rdb.h"

#define PLOT_MAX_PANELS 8
#define PLOT_MAX_BARS 64
#define PLOT_MAX_CATS 24

typedef struct plot_ctx {
    sqlite3 *h;
    char tmp[PATH_MAX];     /* temp folder for .dat and variable files */
    char outdir[PATH_MAX];
    char scripts[PATH_MAX]; /* folder of the .gp scripts */
    const char *term;       /* pngcairo | png | svg */
    const char *ext;
    char series[256];       /* SQL expression naming a run's line: policy (+ model, protocol) */
    char x[32];             /* SQL expression of the sequence length axis */
    const char *xlabel;
    int made, failed;
} plot_ctx;

static void plot_usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim plot DB [-o DIR] [--svg]\n\n"
            "Plots the finished runs of a results database with gnuplot:\n"
            "  latency_vs_seq  online latency (total, and decode per token) vs sequence length\n"
            "                  per policy, a panel per network\n"
            "  comm_vs_seq     online and offline bytes vs sequence length per policy\n"
            "  breakdown       stacked per-category time and bytes at the largest length\n"
            "  pareto          accuracy vs latency with the Pareto front (when the runs have\n"
            "                  accuracy metrics; skipped with a note otherwise)\n"
            "Lines are policies (with model and protocol when those vary); runs that differ\n"
            "in anything else are averaged. Scripts: scripts/*.gp under the data directory\n"
            "($MPCSIM_DATA overrides).\n\n"
            "options:\n"
            "  -o, --output DIR  output folder (default: DB without .db, plus -plots)\n"
            "      --svg         SVG instead of PNG\n"
            "  -h, --help        this help\n\n"
            "exit status: 0 ok, 1 gnuplot or database failure, 2 bad usage or nothing to plot\n");
}

/* ---- helpers --------------------------------------------------------------------------- */

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

/* pngcairo if this gnuplot has it, else png; NULL if gnuplot is missing or has neither. */
static const char *png_terminal(const char *tmp)
{
    static const char *const terms[] = {"pngcairo", "png"};
    char probe[PATH_MAX + 16];
    snprintf(probe, sizeof probe, "%s/probe.gp", tmp);
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(probe, "w");
        if (!f)
            return NULL;
        fprintf(f, "set terminal %s\n", terms[i]);
        fclose(f);
        const char *files[] = {probe};
        if (gnuplot_run(NULL, files, 1, "/dev/null") == 0)
            return terms[i];
    }
    return NULL;
}

/* Opens the variable file of one plot, with the variables every script reads. */
static FILE *vars_open(plot_ctx *c, const char *plot, char *path, size_t n)
{
    snprintf(path, n, "%s/vars_%s.gp", c->tmp, plot);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    char out[PATH_MAX + 64];
    snprintf(out, sizeof out, "%s/%s.%s", c->outdir, plot, c->ext);
    fprintf(f, "term_name = ");
    gnuplot_str(f, c->term);
    fprintf(f, "\noutfile = ");
    gnuplot_str(f, out);
    fprintf(f, "\ndatadir = ");
    gnuplot_str(f, c->tmp);
    fprintf(f, "\nscriptdir = ");
    gnuplot_str(f, c->scripts);
    fprintf(f, "\nxlabel_text = ");
    gnuplot_str(f, c->xlabel);
    fputc('\n', f);
    return f;
}

/* Closes the variable file and runs the plot's script after it. */
static void plot_render(plot_ctx *c, const char *plot, FILE *vars, const char *vars_path)
{
    char script[PATH_MAX + 64];
    snprintf(script, sizeof script, "%s/%s.gp", c->scripts, plot);
    if (fclose(vars)) {
        cli_error("plot", "%s: cannot write: %s", vars_path, strerror(errno));
        c->failed++;
        return;
    }
    const char *files[] = {vars_path, script};
    /* gnuplot's warnings (a one-point axis range, …) are noise on success; on failure the
     * whole log goes to stderr */
    char errlog[PATH_MAX + 32];
    snprintf(errlog, sizeof errlog, "%s/%s.log", c->tmp, plot);
    if (gnuplot_run(NULL, files, 2, errlog)) {
        cli_error("plot", "gnuplot failed on %s:", script);
        FILE *f = fopen(errlog, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
        c->failed++;
        return;
    }
    printf("%s/%s.%s\n", c->outdir, plot, c->ext);
    c->made++;
}

/* Writes the rows of a query (column 0: series title; the rest: numbers; text parameters ?1 and
 * ?2 bound to bind1 and bind2 when given) as gnuplot blocks, one per series, each headed by its
 * title. Returns the number of blocks, -1 on error. */
static int write_blocks(plot_ctx *c, const char *sql, const char *bind1, const char *bind2,
                        const char *path)
{
    sqlite3_stmt *s;
    FILE *f = fopen(path, "w");
    if (!f || sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) != SQLITE_OK) {
        cli_error("plot", "%s:%d: %s", __FILE__, __LINE__, f ? sqlite3_errmsg(c->h) : path);
        if (f)
            fclose(f);
        return -1;
    }
    if (bind1)
        sqlite3_bind_text(s, 1, bind1, -1, SQLITE_STATIC);
    if (bind2)
        sqlite3_bind_text(s, 2, bind2, -1, SQLITE_STATIC);
    char last[256] = "";
    int blocks = 0, ncol = sqlite3_column_count(s);
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *title = (const char *)sqlite3_column_text(s, 0);
        if (!blocks || strcmp(title, last)) {
            fprintf(f, "%s", blocks ? "\n\n" : "");
            gnuplot_str(f, title);
            for (int k = 1; k < ncol; k++)
                fprintf(f, " %s", sqlite3_column_name(s, k));
            fputc('\n', f);
            snprintf(last, sizeof last, "%s", title);
            blocks++;
        }
        for (int k = 1; k < ncol; k++)
            fprintf(f, "%s%.9g", k > 1 ? " " : "", sqlite3_column_double(s, k));
        fputc('\n', f);
    }
    sqlite3_finalize(s);
    return fclose(f) ? -1 : blocks;
}

static int64_t query_int(plot_ctx *c, const char *sql)
{
    sqlite3_stmt *s;
    int64_t v = -1;
    if (sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* ---- what the lines and the x axis are ------------------------------------------------- */

static void plot_axes(plot_ctx *c)
{
    int models = query_int(c, "SELECT count(DISTINCT model) FROM runs WHERE status = 'ok'") > 1;
    int protos = query_int(c, "SELECT count(DISTINCT protocol) FROM runs WHERE status = 'ok'") > 1;
    snprintf(c->series, sizeof c->series, "r.policy%s%s", models ? " || ' ' || r.model" : "",
             protos ? " || ' ' || r.protocol" : "");
    int prompts = query_int(c, "SELECT count(DISTINCT prompt_len) FROM runs WHERE status = 'ok'") > 1;
    int decodes = query_int(c, "SELECT count(DISTINCT decode_len) FROM runs WHERE status = 'ok'") > 1;
    if (!prompts && decodes) {
        snprintf(c->x, sizeof c->x, "r.decode_len");
        c->xlabel = "generated tokens";
    } else {
        snprintf(c->x, sizeof c->x, "r.prompt_len");
        c->xlabel = "prompt length (tokens)";
    }
}

#define RUN_LATENCY_S "((SELECT sum(latency_ns) FROM phases p WHERE p.run_id = r.id) / 1e9)"

/* ---- the plots ------------------------------------------------------------------------- */

static void plot_latency(plot_ctx *c)
{
    sqlite3_stmt *s;
    char nets[PLOT_MAX_PANELS][64], sql[1024], path[PATH_MAX + 32], vpath[PATH_MAX + 32];
    int nn = 0, nb[PLOT_MAX_PANELS];
    if (sqlite3_prepare_v2(c->h, "SELECT DISTINCT network FROM runs WHERE status = 'ok' ORDER BY "
                           "CASE network WHEN 'lan' THEN 0 WHEN 'wan' THEN 1 ELSE 2 END, network",
                           -1, &s, NULL) != SQLITE_OK)
        return (void)c->failed++;
    while (sqlite3_step(s) == SQLITE_ROW && nn < PLOT_MAX_PANELS)
        snprintf(nets[nn++], 64, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    snprintf(sql, sizeof sql,
             "SELECT %s AS series, %s AS x, avg(" RUN_LATENCY_S ") AS latency_s FROM runs r "
             "WHERE r.status = 'ok' AND r.network = ?1 GROUP BY series, x ORDER BY series, x",
             c->series, c->x);
    for (int i = 0; i < nn; i++) {
        snprintf(path, sizeof path, "%s/lat_%d.dat", c->tmp, i + 1);
        if ((nb[i] = write_blocks(c, sql, nets[i], NULL, path)) < 0)
            return (void)c->failed++;
    }
    /* second row: decode latency per generated token — where eviction policies differ (the
     * prefill before eviction is the same for most of them) */
    snprintf(sql, sizeof sql,
             "SELECT %s AS series, %s AS x, avg(p.latency_ns / 1e9 / r.decode_len) AS s FROM runs r "
             "JOIN phases p ON p.run_id = r.id AND p.phase = 'decode' WHERE r.status = 'ok' AND "
             "r.network = ?1 AND r.decode_len > 0 GROUP BY series, x ORDER BY series, x",
             c->series, c->x);
    for (int i = 0; i < nn; i++) {
        snprintf(path, sizeof path, "%s/dec_%d.dat", c->tmp, i + 1);
        if (write_blocks(c, sql, nets[i], NULL, path) < 0)
            return (void)c->failed++;
    }
    FILE *v = vars_open(c, "latency_vs_seq", vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    fprintf(v, "npanels = %d\n", nn);
    for (int i = 0; i < nn; i++) {
        fprintf(v, "panel%d = ", i + 1);
        gnuplot_str(v, nets[i]);
        fprintf(v, "\nnb%d = %d\n", i + 1, nb[i]);
    }
    plot_render(c, "latency_vs_seq", v, vpath);
}

static void plot_comm(plot_ctx *c)
{
    char sql[1024], path[PATH_MAX + 32], vpath[PATH_MAX + 32];
    snprintf(sql, sizeof sql,
             "SELECT %s AS series, %s AS x, avg(b.bytes_p0 + b.bytes_p1 + b.bytes_p2) / 1e9 AS "
             "online_gb, avg(b.offline_p0 + b.offline_p1 + b.offline_p2) / 1e9 AS offline_gb "
             "FROM runs r JOIN (SELECT run_id, sum(bytes_p0) bytes_p0, sum(bytes_p1) bytes_p1, "
             "sum(bytes_p2) bytes_p2, sum(offline_p0) offline_p0, sum(offline_p1) offline_p1, "
             "sum(offline_p2) offline_p2 FROM breakdown WHERE category = 'total' GROUP BY "
             "run_id) b ON b.run_id = r.id WHERE r.status = 'ok' GROUP BY series, x "
             "ORDER BY series, x",
             c->series, c->x);
    snprintf(path, sizeof path, "%s/comm.dat", c->tmp);
    int nb = write_blocks(c, sql, NULL, NULL, path);
    FILE *v = nb < 0 ? NULL : vars_open(c, "comm_vs_seq", vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    fprintf(v, "nb = %d\nhas_offline = %d\n", nb,
            query_int(c, "SELECT count(*) FROM breakdown WHERE category = 'total' AND "
                         "offline_p0 + offline_p1 + offline_p2 > 0") > 0);
    plot_render(c, "comm_vs_seq", v, vpath);
}

/* Bars (label) × categories matrix of one per-run figure, averaged over runs per label. */
typedef struct bars {
    char label[PLOT_MAX_BARS][96];
    char cat[PLOT_MAX_CATS][32];
    double v[PLOT_MAX_BARS][PLOT_MAX_CATS];
    int nl, nc;
} bars;

static int bars_index(char (*names)[96], int *n, int max, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], s))
            return i;
    if (*n == max)
        return -1;
    snprintf(names[*n], 96, "%s", s);
    return (*n)++;
}

static int bars_fill(plot_ctx *c, const char *figure, int64_t x, bars *b)
{
    char sql[1024];
    sqlite3_stmt *s;
    snprintf(sql, sizeof sql,
             "SELECT series, category, avg(v) FROM (SELECT %s || ' / ' || r.network AS series, "
             "b.category AS category, sum(%s) / 1e9 AS v, min(b.rowid) AS ord FROM runs r JOIN "
             "breakdown b ON b.run_id = r.id WHERE r.status = 'ok' AND b.category <> 'total' "
             "AND %s = ?1 GROUP BY r.id, b.category) GROUP BY series, category "
             "ORDER BY min(ord), series",
             c->series, figure, c->x);
    if (sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(s, 1, x);
    memset(b, 0, sizeof *b);
    char cats[PLOT_MAX_CATS][96];
    while (sqlite3_step(s) == SQLITE_ROW) {
        int l = bars_index(b->label, &b->nl, PLOT_MAX_BARS, (const char *)sqlite3_column_text(s, 0));
        int k = bars_index(cats, &b->nc, PLOT_MAX_CATS, (const char *)sqlite3_column_text(s, 1));
        if (l >= 0 && k >= 0)
            b->v[l][k] = sqlite3_column_double(s, 2);
    }
    sqlite3_finalize(s);
    for (int k = 0; k < b->nc; k++)
        snprintf(b->cat[k], sizeof b->cat[k], "%.31s", cats[k]);
    return 0;
}

/* Drops the categories that are zero in every bar of both figures (same categories, same
 * colours in both panels). */
static void bars_drop_zero(bars *a, bars *b)
{
    int kept = 0;
    for (int k = 0; k < a->nc && k < b->nc; k++) {
        double sum = 0;
        for (int l = 0; l < a->nl; l++)
            sum += a->v[l][k];
        for (int l = 0; l < b->nl; l++)
            sum += b->v[l][k];
        if (sum == 0)
            continue;
        for (bars *x = a; x; x = x == a ? b : NULL) {
            for (int l = 0; l < x->nl; l++)
                x->v[l][kept] = x->v[l][k];
            memcpy(x->cat[kept], x->cat[k], sizeof x->cat[k]);
        }
        kept++;
    }
    a->nc = b->nc = kept;
}

static int bars_write(const bars *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "label");
    for (int k = 0; k < b->nc; k++)
        fprintf(f, " %s", b->cat[k]);
    fputc('\n', f);
    for (int l = 0; l < b->nl; l++) {
        gnuplot_str(f, b->label[l]);
        for (int k = 0; k < b->nc; k++)
            fprintf(f, " %.9g", b->v[l][k]);
        fputc('\n', f);
    }
    return fclose(f);
}

static void plot_breakdown(plot_ctx *c)
{
    char sql[256], path[PATH_MAX + 32], vpath[PATH_MAX + 32];
    static bars t, by;
    snprintf(sql, sizeof sql, "SELECT max(%s) FROM runs r WHERE r.status = 'ok'", c->x);
    int64_t x = query_int(c, sql);
    if (bars_fill(c, "b.compute_ns + b.comm_ns", x, &t) ||
        bars_fill(c, "b.bytes_p0 + b.bytes_p1 + b.bytes_p2", x, &by))
        return (void)c->failed++;
    bars_drop_zero(&t, &by);
    snprintf(path, sizeof path, "%s/bd_time.dat", c->tmp);
    int rc = bars_write(&t, path);
    snprintf(path, sizeof path, "%s/bd_bytes.dat", c->tmp);
    rc |= bars_write(&by, path);
    FILE *v = rc ? NULL : vars_open(c, "breakdown", vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    fprintf(v, "ncols = %d\nseq_text = \"%s %lld\"\n", t.nc + 1,
            !strcmp(c->x, "r.decode_len") ? "decode length" : "prompt length", (long long)x);
    plot_render(c, "breakdown", v, vpath);
}

/* The accuracy metric to plot: a preferred one if present, else the first accuracy metric. */
static int pareto_metric(plot_ctx *c, char *out, size_t n)
{
    static const char *const pref[] = {"attn_mass_recall", "mass_recall", "top1_agreement",
                                       "topk_recall", "logit_kl", "attn_out_rel_err"};
    sqlite3_stmt *s;
    char names[64][48];
    int nn = 0;
    if (sqlite3_prepare_v2(c->h, "SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = "
                           "m.run_id WHERE r.status = 'ok' ORDER BY m.name", -1, &s, NULL))
        return 0;
    while (sqlite3_step(s) == SQLITE_ROW && nn < 64)
        snprintf(names[nn++], 48, "%.47s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    for (size_t p = 0; p < sizeof pref / sizeof pref[0]; p++)
        for (int i = 0; i < nn; i++)
            if (!strcmp(names[i], pref[p]))
                return snprintf(out, n, "%s", names[i]) > 0;
    for (int i = 0; i < nn; i++)
        if (rdb_metric_is_accuracy(names[i]))
            return snprintf(out, n, "%s", names[i]) > 0;
    return 0;
}

/* The Pareto front of (latency, metric) points: sorted by latency, each point that beats
 * every faster one. */
static int pareto_front(plot_ctx *c, const char *metric, const char *net, int lower,
                        const char *path)
{
    char sql[512];
    sqlite3_stmt *s;
    snprintf(sql, sizeof sql,
             "SELECT " RUN_LATENCY_S " AS lat, m.value FROM runs r JOIN metrics m ON m.run_id = "
             "r.id WHERE r.status = 'ok' AND m.name = ?1 AND r.network = ?2 ORDER BY lat, "
             "m.value %s", lower ? "ASC" : "DESC");
    FILE *f = fopen(path, "w");
    if (!f || sqlite3_prepare_v2(c->h, sql, -1, &s, NULL) != SQLITE_OK) {
        if (f)
            fclose(f);
        return -1;
    }
    sqlite3_bind_text(s, 1, metric, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, net, -1, SQLITE_STATIC);
    int any = 0;
    double best = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        double lat = sqlite3_column_double(s, 0), v = sqlite3_column_double(s, 1);
        if (!any || (lower ? v < best : v > best)) {
            fprintf(f, "%.9g %.9g\n", lat, v);
            best = v;
            any = 1;
        }
    }
    sqlite3_finalize(s);
    return fclose(f);
}

static void plot_pareto(plot_ctx *c)
{
    char metric[48], net[64] = "", sql[1024], path[PATH_MAX + 32], vpath[PATH_MAX + 32];
    if (!pareto_metric(c, metric, sizeof metric)) {
        printf("note: no accuracy metrics in this database; skipping the Pareto plot\n");
        return;
    }
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(c->h, "SELECT network FROM runs WHERE status = 'ok' GROUP BY network "
                           "ORDER BY network <> 'lan', count(*) DESC LIMIT 1", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        snprintf(net, sizeof net, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    int lower = rdb_metric_lower_is_better(metric);
    snprintf(sql, sizeof sql,
             "SELECT %s AS series, " RUN_LATENCY_S " AS latency_s, m.value AS value FROM runs r "
             "JOIN metrics m ON m.run_id = r.id WHERE r.status = 'ok' AND r.network = ?2 AND "
             "m.name = ?1 ORDER BY series, latency_s",
             c->series);
    snprintf(path, sizeof path, "%s/pareto.dat", c->tmp);
    int nb = write_blocks(c, sql, metric, net, path);
    snprintf(path, sizeof path, "%s/front.dat", c->tmp);
    FILE *v = nb < 1 || pareto_front(c, metric, net, lower, path)
                  ? NULL
                  : vars_open(c, "pareto", vpath, sizeof vpath);
    if (!v)
        return (void)c->failed++;
    fprintf(v, "nb = %d\nmetric_name = ", nb);
    gnuplot_str(v, metric);
    fprintf(v, "\nbetter = \"%s\"\nnet_name = ", lower ? "lower" : "higher");
    gnuplot_str(v, net);
    fputc('\n', v);
    plot_render(c, "pareto", v, vpath);
}

/* ---- the command ----------------------------------------------------------------------- */

/* Removes the temp folder and the files this command wrote in it. */
static void rm_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[PATH_MAX + 300];
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int plot_parse(int argc, char **argv, const char **db, const char **out, int *svg)
{
    static const struct option lo[] = {{"output", required_argument, NULL, 'o'},
                                       {"svg", no_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c;
    *out = NULL;
    *svg = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o': *out = optarg; break;
        case 's': *svg = 1; break;
        case 'h': plot_usage(stdout); return 1;
        default: plot_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        cli_error("plot", optind >= argc ? "no database given" : "one database only");
        plot_usage(stderr);
        return 2;
    }
    *db = argv[optind];
    return 0;
}

static int plot_prepare(plot_ctx *c, const char *dbpath, const char *out, int svg)
{
    snprintf(c->scripts, sizeof c->scripts, "%s/scripts", mpcsim_datadir());
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/latency_vs_seq.gp", c->scripts);
    if (access(probe, R_OK)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        cli_error("plot", "no gnuplot scripts in %s\n  hint: the data folder was looked for in %s",
                  c->scripts, where);
        return 2;
    }
    if (out)
        snprintf(c->outdir, sizeof c->outdir, "%s", out);
    else {
        size_t n = strlen(dbpath);
        int strip = n > 3 && !strcmp(dbpath + n - 3, ".db");
        snprintf(c->outdir, sizeof c->outdir, "%.*s-plots", (int)(strip ? n - 3 : n), dbpath);
    }
    if (mkdir_p(c->outdir)) {
        cli_error("plot", "cannot create %s: %s", c->outdir, strerror(errno));
        return 1;
    }
    const char *tmpdir = getenv("TMPDIR");
    snprintf(c->tmp, sizeof c->tmp, "%s/mpcsim-plot-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(c->tmp)) {
        cli_error("plot", "cannot create a temp folder: %s", strerror(errno));
        return 1;
    }
    c->term = svg ? "svg" : png_terminal(c->tmp);
    c->ext = svg ? "svg" : "png";
    if (!c->term) {
        cli_error("plot", "gnuplot with a png or pngcairo terminal is needed\n---> HINT: "
                  "apt-get install gnuplot-nox (scripts/install-deps.sh), or use --svg");
        return 1;
    }
    return 0;
}

int cmd_plot(int argc, char **argv)
{
    const char *dbpath, *out;
    int svg;
    int st = plot_parse(argc, argv, &dbpath, &out, &svg);
    if (st)
        return st == 1 ? 0 : 2;
    rdb *db;
    errbuf e;
    int rc = rdb_open(dbpath, 0, &db, &e);
    if (rc) {
        cli_error("plot", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    plot_ctx c = {.h = rdb_handle(db)};
    if (query_int(&c, "SELECT count(*) FROM runs WHERE status = 'ok'") < 1) {
        cli_error("plot", "%s holds no finished run to plot", dbpath);
        rdb_close(db);
        return 2;
    }
    st = plot_prepare(&c, dbpath, out, svg);
    if (!st) {
        plot_axes(&c);
        plot_latency(&c);
        plot_comm(&c);
        plot_breakdown(&c);
        plot_pareto(&c);
        st = c.failed ? 1 : 0;
    }
    if (c.tmp[0] && strstr(c.tmp, "mpcsim-plot-"))
        rm_tmp(c.tmp);
    rdb_close(db);
    return st;
}

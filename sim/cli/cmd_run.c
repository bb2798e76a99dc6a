/* cmd_run.c — `mpcsim run`: expand a scenario, select its runs (shard, resume), execute them
 * through the worker pool (sim/scenario/pool.h), and record every run in the results database
 * in its own transaction as it arrives. The parent is the only writer. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "results/rdb.h"
#include "sim/scenario/pool.h"
#include "sim/scenario/runcfg.h"
#include "sim/scenario/scn.h"


typedef struct run_opts {
    const char *scenario;
    const char *db;
    long jobs;
    int resume, dry_run, verbose, quiet;
    unsigned long shard_k, shard_n; /* 1-based K of N; 0/0 = no sharding */
} run_opts;

/* ---- options --------------------------------------------------------------------------- */

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim run SCENARIO.yaml [-o DB] [-j N] [--resume] [--shard K/N] [--dry-run]\n"
            "                  [-v] [--quiet]\n\n"
            "Expands the scenario's sweep and records every run in an SQLite database (one\n"
            "transaction per run: a killed sweep keeps every finished run and no partial one).\n\n"
            "options:\n"
            "  -o, --output DB   database (default: the scenario's output:, else\n"
            "                    results/<scenario-name>.db)\n"
            "  -j, --jobs N      N worker processes (default 1); the parent is the only writer\n"
            "      --resume      run only what the database lacks (runs are keyed by the hash\n"
            "                    of their resolved config); failed runs are tried again\n"
            "      --shard K/N   only runs whose index %% N == K-1 (1 <= K <= N): for Slurm\n"
            "                    arrays, GNU parallel or mpirun; give each shard its own -o and\n"
            "                    fold them with `mpcsim merge`\n"
            "      --shard auto  K/N from the launcher: OMPI_COMM_WORLD_RANK/SIZE (mpirun),\n"
            "                    PMI_RANK/SIZE, SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/NTASKS\n"
            "                    (-o may then contain {shard}, replaced by K)\n"
            "      --dry-run     print the expanded runs (hash and summary) and write nothing\n"
            "  -v, --verbose     with --dry-run: print each run's resolved YAML\n"
            "  -q, --quiet       no progress bar and no summary\n"
            "  -h, --help        this help\n\n"
            "exit status: 0 every run ok, 1 a run or the database failed, 2 bad usage or input\n");
}

/* --shard auto: the rank and size a launcher gives each process (0-based rank). */
static int shard_from_env(char *out, size_t n)
{
    static const char *const vars[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, /* Open MPI mpirun */
        {"PMI_RANK", "PMI_SIZE"},                         /* MPICH / Intel MPI */
        {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"}, /* sbatch --array=0-(N-1) */
        {"SLURM_PROCID", "SLURM_NTASKS"},                 /* srun -n N */
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *r = getenv(vars[i][0]), *z = getenv(vars[i][1]);
        unsigned long long rank, size;
        if (r && z && !parse_u64(r, &rank) && !parse_u64(z, &size)) {
            snprintf(out, n, "%llu/%llu", rank + 1, size);
            return 0;
        }
    }
    return -1;
}

static int parse_shard(const char *arg, run_opts *o)
{
    char buf[64];
    if (!strcmp(arg, "auto")) {
        if (shard_from_env(buf, sizeof buf))
            return -2;
    } else {
        snprintf(buf, sizeof buf, "%s", arg);
    }
    char *slash = strchr(buf, '/');
    unsigned long long k, n;
    if (!slash)
        return -1;
    *slash = '\0';
    if (parse_u64(buf, &k) || parse_u64(slash + 1, &n) || n == 0 || k < 1 || k > n)
        return -1;
    o->shard_k = (unsigned long)k;
    o->shard_n = (unsigned long)n;
    return 0;
}

/* 0 ok, 1 --help printed, 2 usage error (printed). */
static int run_parse(int argc, char **argv, run_opts *o)
{
    static const struct option lo[] = {
        {"output", required_argument, NULL, 'o'}, {"jobs", required_argument, NULL, 'j'},
        {"resume", no_argument, NULL, 'R'},       {"shard", required_argument, NULL, 'S'},
        {"dry-run", no_argument, NULL, 'n'},      {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    *o = (run_opts){.jobs = 1};
    long long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:j:vqh", lo, NULL)) != -1) {
        switch (c) {
        case 'o': o->db = optarg; break;
        case 'j':
            if (parse_i64(optarg, &v) || v < 1 || v > POOL_MAX_JOBS) {
                cli_error("run", "-j wants a number of workers from 1 to %d, not '%s'",
                          POOL_MAX_JOBS, optarg);
                return 2;
            }
            o->jobs = (long)v;
            break;
        case 'R': o->resume = 1; break;
        case 'S':
            switch (parse_shard(optarg, o)) {
            case 0: break;
            case -2:
                cli_error("run", "--shard auto: no launcher rank in the environment (looked "
                          "for OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_ARRAY_TASK_ID, "
                          "SLURM_PROCID)");
                return 2;
            default:
                cli_error("run", "--shard wants K/N with 1 <= K <= N (e.g. 2/8) or auto, not "
                          "'%s'", optarg);
                return 2;
            }
            break;
        case 'n': o->dry_run = 1; break;
        case 'v': o->verbose = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': run_usage(stdout); return 1;
        default: run_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        cli_error("run", optind >= argc ? "no scenario file given" : "one scenario file only");
        run_usage(stderr);
        return 2;
    }
    o->scenario = argv[optind];
    return 0;
}

/* ---- the runs to do -------------------------------------------------------------------- */

static const scenario *sort_scn; /* qsort has no context argument */

static int by_hash(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(sort_scn->runs[i].hash, sort_scn->runs[j].hash);
    return c ? c : (i > j) - (i < j);
}

/* Runs of this shard, in grid order, without repeated config hashes (the first grid point
 * keeps a hash); indices into s->runs. */
static size_t select_runs(scenario *s, const run_opts *o, size_t *sel, errbuf *e, int *rc)
{
    size_t n = 0;
    *rc = MS_OK;
    for (size_t i = 0; i < s->n_runs; i++) {
        run_cfg *c = &s->runs[i];
        if (o->shard_n && c->index % o->shard_n != o->shard_k - 1)
            continue;
        if (!c->yaml && (*rc = scn_resolve_yaml(c, e)))
            return 0;
        sel[n++] = i;
    }
    size_t *sorted = malloc((n + 1) * sizeof *sorted);
    char *dup = calloc(s->n_runs + 1, 1);
    if (!sorted || !dup) {
        free(sorted);
        free(dup);
        *rc = err_set(e, MS_ERR_NOMEM, "out of memory expanding %s", s->path);
        return 0;
    }
    memcpy(sorted, sel, n * sizeof *sel);
    sort_scn = s;
    qsort(sorted, n, sizeof *sorted, by_hash);
    for (size_t k = 1; k < n; k++)
        if (!strcmp(s->runs[sorted[k]].hash, s->runs[sorted[k - 1]].hash))
            dup[sorted[k]] = 1;
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (!dup[sel[k]])
            sel[m++] = sel[k];
    free(sorted);
    free(dup);
    return m;
}

static void print_summary_line(FILE *f, const run_cfg *c)
{
    fprintf(f, "%s  #%-4zu %s %s %s %s P=%u D=%u seed=%llu\n", c->hash, c->index,
            c->model_ref[0] ? c->model_ref : c->model.name, c->proto_ref, c->net_ref,
            c->policy.name, c->work.prompt_len, c->work.decode_len,
            (unsigned long long)c->seed);
}

static void dry_run(const scenario *s, const size_t *sel, size_t n, int verbose)
{
    for (size_t i = 0; i < n; i++) {
        const run_cfg *c = &s->runs[sel[i]];
        if (verbose)
            printf("# run %zu  hash %s\n%s%s---\n", c->index, c->hash, c->yaml,
                   c->yaml[0] && c->yaml[strlen(c->yaml) - 1] == '\n' ? "" : "\n");
        else
            print_summary_line(stdout, c);
    }
    printf("%zu run%s\n", n, n == 1 ? "" : "s");
}

/* ---- storing a result ------------------------------------------------------------------ */

static void to_stats(const sim_stats *s, rdb_stats *d)
{
    memset(d, 0, sizeof *d);
    d->rounds = s->rounds;
    for (int p = 0; p < MPC_PARTIES_MAX && p < RDB_PARTIES; p++) {
        d->bytes[p] = s->bytes_sent[p];
        d->offline[p] = s->offline_bytes[p];
    }
    d->compute_ns = s->compute_ns;
    d->comm_ns = s->comm_ns;
}

typedef struct store_rows {
    rdb_metric *m;
    rdb_phase ph[PHASE_N];
    rdb_breakdown bd[PHASE_N * (OPC_N + 1)];
    rdb_layer *ly;
} store_rows;

/* *stored = 0 when another process had stored the run meanwhile (ours is dropped). */
static int store_result(rdb *db, const run_cfg *c, const pool_result *j, int *stored, errbuf *e)
{
    const run_result *res = &j->res;
    store_rows w = {0};
    size_t nl = 0, nb = 0;
    for (int p = 0; p < PHASE_N; p++)
        nl += res->phase[p].layer ? res->phase[p].n_layers : 0;
    w.m = calloc(res->n_metric + 1, sizeof *w.m);
    w.ly = calloc(nl + 1, sizeof *w.ly);
    if (!w.m || !w.ly) {
        free(w.m);
        free(w.ly);
        return err_set(e, MS_ERR_NOMEM, "out of memory storing a run");
    }
    for (size_t i = 0; i < res->n_metric; i++)
        w.m[i] = (rdb_metric){res->metric[i].name, res->metric[i].value, res->metric[i].unit};
    nl = 0;
    for (int p = 0; p < PHASE_N; p++) {
        const sim_result *r = &res->phase[p];
        w.ph[p] = (rdb_phase){op_phase_name(p), r->latency_ns, r->events};
        w.bd[nb].phase = op_phase_name(p);
        w.bd[nb].category = "total";
        to_stats(&r->total, &w.bd[nb++].s);
        for (int k = 0; k < OPC_N; k++) {
            w.bd[nb].phase = op_phase_name(p);
            w.bd[nb].category = op_cat_name(k);
            to_stats(&r->cat[k], &w.bd[nb++].s);
        }
        for (size_t l = 0; r->layer && l < r->n_layers; l++) {
            w.ly[nl].phase = op_phase_name(p);
            w.ly[nl].layer = (int)l;
            to_stats(&r->layer[l], &w.ly[nl++].s);
        }
    }
    rdb_run row = {
        .scenario = c->scenario, .grid_index = c->index, .config_hash = c->hash,
        .config_yaml = c->yaml, .seed = c->seed, .status = j->rc ? "failed" : "ok",
        .error = j->rc ? j->err.msg : NULL, .started = j->started, .finished = j->finished,
        .wall_s = res->wall_s, .tool_version = MPCSIM_VERSION,
        .model = c->model_ref[0] ? c->model_ref : c->model.name,
        .protocol = c->proto_ref[0] ? c->proto_ref : c->proto.name,
        .network = c->net_ref[0] ? c->net_ref : c->net.name, .policy = c->policy.name,
        .prompt_len = c->work.prompt_len, .decode_len = c->work.decode_len,
        .batch = c->work.batch, .metric = w.m, .n_metric = res->n_metric, .phase = w.ph,
        .n_phase = j->rc ? 0 : PHASE_N, .breakdown = w.bd, .n_breakdown = j->rc ? 0 : nb,
        .layer = w.ly, .n_layer = j->rc ? 0 : nl};
    if (j->rc)
        row.n_metric = 0;
    int64_t id = 0;
    int rc = rdb_run_put(db, &row, &id, e);
    if (rc == MS_OK && stored)
        *stored = id != 0;
    free(w.m);
    free(w.ly);
    return rc;
}

/* ---- progress -------------------------------------------------------------------------- */

typedef struct progress {
    int on;
    size_t done, total, failed;
    double t0;
} progress;

static void progress_show(progress *pg)
{
    if (!pg->on)
        return;
    double dt = pool_now_s() - pg->t0, rate = dt > 0 ? (double)pg->done / dt : 0;
    double eta = rate > 0 ? (double)(pg->total - pg->done) / rate : 0;
    int width = 30, fill = pg->total ? (int)((double)width * (double)pg->done / (double)pg->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %zu/%zu  %.2f run/s  ETA %d:%02d%s\033[K", bar, pg->done, pg->total,
            rate, (int)(eta / 60), (int)eta % 60, pg->failed ? "  (failures)" : "");
    if (pg->done == pg->total)
        fputc('\n', stderr);
}

/* ---- recording the results as they come ------------------------------------------------ */

typedef struct sweep {
    scenario *s;
    const size_t *sel;  /* selection: indices into s->runs */
    rdb *db;
    progress pg;
    size_t raced;       /* runs another process stored while we ran them */
    int db_rc;          /* first database error */
    errbuf db_err;
} sweep;

/* Stores a finished run; reports a failed run on stderr. */
static void sweep_record(void *ctx, pool_result *j)
{
    sweep *sw = ctx;
    const run_cfg *c = &sw->s->runs[sw->sel[j->pos]];
    if (j->rc) {
        sw->pg.failed++;
        if (sw->pg.on)
            fputc('\n', stderr);
        fprintf(stderr, "mpcsim run: error: run #%zu (%s) failed: %s\n", c->index, c->hash,
                j->err.msg);
    }
    errbuf e;
    int stored = 1;
    int rc = store_result(sw->db, c, j, &stored, &e);
    if (!rc && !stored) {
        sw->raced++;
        if (j->rc)
            sw->pg.failed--; /* a concurrent process has it ok: not a failure of the sweep */
    }
    if (rc && !sw->db_rc) {
        sw->db_rc = rc;
        sw->db_err = e;
    }
    sw->pg.done++;
    progress_show(&sw->pg);
}

static int sweep_stopped(void *ctx) { return ((sweep *)ctx)->db_rc != 0; }

/* ---- the command ----------------------------------------------------------------------- */

/* The database path: -o (its "{shard}" replaced by K), else the scenario's output:, else
 * results/<name>.db. */
static void db_path_for(const run_opts *o, const scenario *s, char *out, size_t n)
{
    const char *mark = o->db ? strstr(o->db, "{shard}") : NULL;
    if (mark)
        snprintf(out, n, "%.*s%lu%s", (int)(mark - o->db), o->db, o->shard_k, mark + 7);
    else if (o->db)
        snprintf(out, n, "%s", o->db);
    else if (s->db[0])
        snprintf(out, n, "%s", s->db);
    else
        snprintf(out, n, "results/%s.db", s->name);
}

/* Opens the database (creating its folders), refuses to mix a fresh sweep into a database that
 * already holds this scenario, and drops done runs from the selection under --resume. Returns
 * an exit status, 0 to go on. */
static int open_db(const run_opts *o, const scenario *s, const char *path, size_t *sel,
                   size_t *n, rdb **db)
{
    errbuf e;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) /* the database's folders; an error shows at open */
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0777);
            *p = '/';
        }
    int rc = rdb_open(path, 1, db, &e);
    if (rc) {
        fprintf(stderr, "mpcsim run: error: %s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    int64_t have = 0;
    if ((rc = rdb_scenario_runs(*db, s->name, &have, &e)))
        goto fail;
    if (have > 0 && !o->resume) {
        cli_error("run", "%s already holds %lld run%s of scenario '%s'\n"
                  "---> HINT: add --resume to run only what is missing, or write elsewhere "
                  "with -o", path, (long long)have, have == 1 ? "" : "s", s->name);
        rdb_close(*db);
        *db = NULL;
        return 2;
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        int done = 0;
        if ((rc = rdb_run_done(*db, s->runs[sel[i]].hash, &done, &e)))
            goto fail;
        if (!done)
            sel[k++] = sel[i];
    }
    *n = k;
    if ((rc = rdb_scenario_put(*db, s->name, s->path, s->yaml, &e)))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "mpcsim run: error: %s\n", e.msg);
    rdb_close(*db);
    *db = NULL;
    return ms_err_exit_code(rc);
}

static int run_sweep(const run_opts *o, scenario *s, size_t *sel, size_t n_sel)
{
    char path[1024];
    rdb *db = NULL;
    size_t n = n_sel;
    db_path_for(o, s, path, sizeof path);
    int status = open_db(o, s, path, sel, &n, &db);
    if (status)
        return status;
    sweep sw = {.s = s, .sel = sel, .db = db};
    sw.pg = (progress){.on = !o->quiet && isatty(STDERR_FILENO), .total = n, .t0 = pool_now_s()};
    if (n == 0 && !o->quiet)
        printf("%s: nothing to run (%zu of %zu runs already recorded)\n", path, n_sel, n_sel);
    if (n > 0)
        progress_show(&sw.pg);
    pool_sink sink = {sweep_record, sweep_stopped, &sw};
    pool_run(s->runs, sel, n, o->jobs, &sink);
    if (sw.db_rc)
        fprintf(stderr, "mpcsim run: error: %s\n", sw.db_err.msg);
    if (n > 0 && !o->quiet)
        printf("%s: %zu run%s recorded (%zu failed, %zu already there) in %.1f s\n", path,
               sw.pg.done - sw.pg.failed - sw.raced,
               sw.pg.done - sw.pg.failed - sw.raced == 1 ? "" : "s", sw.pg.failed,
               n_sel - n + sw.raced, pool_now_s() - sw.pg.t0);
    if (rdb_close(db) && !sw.db_rc)
        sw.db_rc = MS_ERR_DB;
    return sw.db_rc || sw.pg.failed || sw.pg.done < n ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int st = run_parse(argc, argv, &o);
    if (st)
        return st == 1 ? 0 : 2;
    if (access(o.scenario, R_OK)) {
        cli_error("run", "cannot read %s: %s", o.scenario, strerror(errno));
        return 2;
    }
    scenario s;
    errbuf e;
    int rc = scn_load(o.scenario, NULL, &s, &e);
    if (rc) {
        fprintf(stderr, "%s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    size_t *sel = calloc(s.n_runs + 1, sizeof *sel);
    if (!sel) {
        scn_free(&s);
        cli_error("run", "out of memory");
        return 1;
    }
    size_t n = select_runs(&s, &o, sel, &e, &rc);
    if (rc) {
        fprintf(stderr, "%s\n", e.msg);
        st = ms_err_exit_code(rc);
    } else if (o.dry_run) {
        dry_run(&s, sel, n, o.verbose);
    } else {
        st = run_sweep(&o, &s, sel, n);
    }
    free(sel);
    scn_free(&s);
    return st;
}

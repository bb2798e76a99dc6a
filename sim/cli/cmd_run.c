/* cmd_run.c — `mpcsim run`: expand one or more scenarios, select their runs (shard, resume),
 * execute them through the worker pool (sim/scenario/pool.h), and record every run in the
 * results database in its own transaction as it arrives, with progress on stderr
 * (sim/cli/progress.h). The parent is the only writer. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "opt.h"
#include "progress.h"
#include "run_figures.h"
#include "results/rdb.h"
#include "sim/replay/replay.h"
#include "sim/scenario/pool.h"
#include "sim/scenario/runner.h"
#include "sim/scenario/runlabel.h"
#include "sim/scenario/runrow.h"
#include "sim/scenario/scn.h"

#define RUN_MAX_JOBS POOL_MAX_JOBS
#define RUN_MAX_SCENARIOS 256

typedef struct run_opts {
    const char *scenario[RUN_MAX_SCENARIOS]; /* files, after folders are expanded */
    char *owned[RUN_MAX_SCENARIOS];          /* the expanded paths this owns */
    size_t n_scenarios;
    const char **args; /* the files and folders as given (owned) */
    int n_args;
    const char *db;
    int jobs;
    int resume, dry_run, verbose, quiet;
    double progress_s;              /* seconds between progress lines when not a terminal */
    unsigned long shard_k, shard_n; /* 1-based K of N; 0/0 = no sharding */
} run_opts;

/* ---- options --------------------------------------------------------------------------- */

static void run_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim run SCENARIO.yaml|DIR... [-o DB] [-j N] [--resume] [--shard K/N]\n"
               "                  [--dry-run] [-v] [--quiet]\n\n"
               "Expands the scenarios' sweeps and records every run in one SQLite database (one\n"
               "transaction per run: a killed sweep keeps every finished run, no partial one).\n"
               "A folder stands for its *.yaml files, in name order. Every scenario is checked\n"
               "before anything runs.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "Progress goes to stderr: on a terminal a bar with the runs in flight, their\n"
               "elapsed time and an ETA weighted by each run's expected cost; otherwise (a\n"
               "batch log) one such line every 10 s. SIGINT or SIGTERM ends the sweep with a\n"
               "line saying how many runs are kept and how to --resume.\n\n"
               "exit status: 0 every run ok, 1 a run or the database failed, 2 bad usage or\n"
               "input, 130 / 143 interrupted by SIGINT / SIGTERM\n");
}

/* --shard auto: the rank and size a launcher gives each process (0-based rank). */
static int shard_from_env(char *out, size_t n)
{
    static const char *const vars[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},  /* Open MPI mpirun */
        {"PMI_RANK", "PMI_SIZE"},                          /* MPICH / Intel MPI */
        {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"}, /* sbatch --array=0-(N-1) */
        {"SLURM_PROCID", "SLURM_NTASKS"},                  /* srun -n N */
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

static int take_shard(const cli_opt *opt, const char *arg, errbuf *e)
{
    run_opts *o = opt->dest;
    char buf[64];
    if (!strcmp(arg, "auto")) {
        if (shard_from_env(buf, sizeof buf))
            return err_set(
                e, MS_ERR_USAGE,
                "--shard auto: no launcher rank in the environment (looked "
                "for OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_ARRAY_TASK_ID, SLURM_PROCID)");
    } else {
        snprintf(buf, sizeof buf, "%s", arg);
    }
    char *slash = strchr(buf, '/');
    unsigned long long k, n;
    if (slash)
        *slash = '\0';
    if (!slash || parse_u64(buf, &k) || parse_u64(slash + 1, &n) || n == 0 || k < 1 || k > n)
        return err_set(e, MS_ERR_USAGE,
                       "--shard wants K/N with 1 <= K <= N (e.g. 2/8) or auto, not '%s'", arg);
    o->shard_k = (unsigned long)k;
    o->shard_n = (unsigned long)n;
    return MS_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A scenario file, or a folder's *.yaml / *.yml files in name order. */
static int add_scenario_arg(run_opts *o, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) || !S_ISDIR(st.st_mode)) {
        if (o->n_scenarios == RUN_MAX_SCENARIOS) {
            cli_error("run", "more than %d scenarios", RUN_MAX_SCENARIOS);
            return -1;
        }
        o->scenario[o->n_scenarios++] = arg;
        return 0;
    }
    DIR *d = opendir(arg);
    if (!d) {
        cli_error("run", "cannot read the folder %s: %s", arg, strerror(errno));
        return -1;
    }
    char *names[RUN_MAX_SCENARIOS];
    size_t n = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        int yaml = (len > 5 && !strcmp(de->d_name + len - 5, ".yaml")) ||
                   (len > 4 && !strcmp(de->d_name + len - 4, ".yml"));
        if (!yaml || de->d_name[0] == '.')
            continue;
        if (n == RUN_MAX_SCENARIOS || o->n_scenarios + n >= RUN_MAX_SCENARIOS) {
            cli_error("run", "more than %d scenarios", RUN_MAX_SCENARIOS);
            rc = -1;
            break;
        }
        size_t pl = strlen(arg) + len + 2;
        if (!(names[n] = malloc(pl))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], pl, "%s%s%s", arg, arg[strlen(arg) - 1] == '/' ? "" : "/", de->d_name);
    }
    closedir(d);
    if (!rc && n == 0) {
        cli_error("run", "no *.yaml scenario in the folder %s", arg);
        rc = -1;
    }
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc) {
            free(names[i]);
            continue;
        }
        o->owned[o->n_scenarios] = names[i];
        o->scenario[o->n_scenarios++] = names[i];
    }
    return rc;
}

static void run_opts_free(run_opts *o)
{
    for (size_t i = 0; i < RUN_MAX_SCENARIOS; i++)
        free(o->owned[i]);
    free(o->args);
}

/* 0 ok, 1 --help printed, 2 usage error (printed). */
static int run_parse(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){.jobs = 1, .progress_s = 10};
    char jobs_want[48];
    snprintf(jobs_want, sizeof jobs_want, "a number of workers from 1 to %d", RUN_MAX_JOBS);
    const cli_opt opts[] = {
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &o->db,
         .arg = "DB",
         .help = "database (default: the scenario's output:, else\n"
                 "results/<scenario-name>.db; several scenarios that name\n"
                 "different databases need -o)"},
        {.name = "jobs",
         .short_name = 'j',
         .kind = CLI_INT,
         .dest = &o->jobs,
         .arg = "N",
         .lo = 1,
         .hi = RUN_MAX_JOBS,
         .want = jobs_want,
         .help = "N worker processes (default 1); the parent alone writes"},
        {.name = "resume",
         .kind = CLI_FLAG,
         .dest = &o->resume,
         .help = "run only what the database lacks (runs are keyed by the hash\n"
                 "of their resolved config); failed runs are tried again"},
        {.name = "shard",
         .kind = CLI_FN,
         .dest = o,
         .arg = "K/N",
         .fn = take_shard,
         .help = "only runs whose index % N == K-1 (1 <= K <= N): for Slurm\n"
                 "arrays, GNU parallel or mpirun; give each shard its own -o\n"
                 "and fold them with `mpcsim merge`. --shard auto: K/N from\n"
                 "the launcher: OMPI_COMM_WORLD_RANK/SIZE (mpirun),\n"
                 "PMI_RANK/SIZE, SLURM_ARRAY_TASK_ID/COUNT,\n"
                 "SLURM_PROCID/NTASKS (-o may then contain {shard},\n"
                 "replaced by K)"},
        {.name = "dry-run",
         .kind = CLI_FLAG,
         .dest = &o->dry_run,
         .help = "print the expanded runs (hash and summary) and their\nestimated CPU time, warn "
                 "about settings that make\nthem slow, and write nothing"},
        {.name = "verbose",
         .short_name = 'v',
         .kind = CLI_FLAG,
         .dest = &o->verbose,
         .help = "with --dry-run: print each run's resolved YAML"},
        {.name = "quiet",
         .short_name = 'q',
         .kind = CLI_FLAG,
         .dest = &o->quiet,
         .help = "no progress and no summary"},
        {.name = "progress-every",
         .kind = CLI_F64,
         .dest = &o->progress_s,
         .arg = "S",
         .lo = 0.1,
         .hi = 86400,
         .want = "seconds from 0.1 to 86400",
         .help = "seconds between progress lines when stderr is not a\nterminal (default 10)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"run", opts, sizeof opts / sizeof opts[0], 20, argc};
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_pos = 0, rc = pos ? cli_parse_cmd(&cmd, argc, argv, pos, &n_pos, run_usage) : 2;
    if (rc == 0 && n_pos == 0) {
        cli_error("run", "no scenario file given");
        run_usage(stderr, &cmd);
        rc = 2;
    }
    for (int i = 0; rc == 0 && i < n_pos; i++)
        if (add_scenario_arg(o, pos[i]))
            rc = 2;
    o->args = pos;
    o->n_args = n_pos;
    if (rc) {
        free(pos);
        o->args = NULL;
    }
    return rc == CLI_HELP_ASKED ? 1 : rc;
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
    rdb_labels l;
    run_labels(c, &l);
    fprintf(f, "%s  #%-4zu %s %s %s %s P=%u D=%u seed=%llu\n", c->hash, c->index, l.model,
            l.protocol_label, l.network, l.policy_label, c->work.prompt_len, c->work.decode_len,
            (unsigned long long)c->seed);
}

/* ---- --dry-run: the runs, their estimated CPU time, the settings that make them slow ---- */

/* A prompt this long or longer is long context, where reading every prompt row's attention
 * (prompt_rows 0) dominates a run; the cap the warning suggests. */
#define DRY_LONG_PROMPT 4096
#define DRY_PROMPT_ROWS 256

/* What the runs of one dry run hold (the replay's work counted once per distinct policy,
 * workload and model shape: a sweep's protocols and networks share it). */
typedef struct dry_est {
    struct dry_key {
        char key[1024];
        replay_work w, capped; /* capped: with prompt_rows DRY_PROMPT_ROWS */
    } * k;
    size_t n, cap;
    double cpu_s;                 /* the runs' estimated CPU time */
    size_t n_slow;                /* runs reading every row of a long prompt */
    double slow_s, slow_capped_s; /* their estimate, and with the cap */
    const run_cfg *slow;          /* the first of them */
} dry_est;

static void dry_key_of(const run_cfg *c, char *k, size_t cap)
{
    const model_cfg *m = &c->model;
    int n = snprintf(k, cap, "%s|%s|%u|%u|%u|%u|%u|%u|%s", c->trace.source, c->policy.name,
                     c->work.prompt_len, c->work.decode_len, m->n_layers, m->n_heads, m->n_kv_heads,
                     m->head_dim, c->scenario_path);
    for (size_t i = 0; i < c->policy.n_params && n > 0 && (size_t)n < cap; i++)
        n += snprintf(k + n, cap - (size_t)n, "|%s=%s", c->policy.params[i].key,
                      c->policy.params[i].val);
}

/* The replay work of c (and when capped, with prompt_rows capped), counted or remembered
 * (none when the policy cannot be made without its run); NULL when out of memory. */
static const struct dry_key *dry_work(dry_est *d, const run_cfg *c, int capped)
{
    char key[1024];
    dry_key_of(c, key, sizeof key);
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->k[i].key, key))
            return &d->k[i];
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        struct dry_key *k = realloc(d->k, cap * sizeof *k);
        if (!k)
            return NULL;
        d->k = k;
        d->cap = cap;
    }
    struct dry_key *k = &d->k[d->n];
    snprintf(k->key, sizeof k->key, "%s", key);
    errbuf e;
    if (replay_estimate(c, &k->w, &e)) /* the run itself will say why: no rows counted */
        memset(&k->w, 0, sizeof k->w);
    k->capped = k->w;
    if (capped && k->w.prompt_att_rows > DRY_PROMPT_ROWS && c->policy.n_params < RUN_MAX_PARAMS) {
        run_cfg *t = malloc(sizeof *t);
        if (!t)
            return NULL;
        *t = *c;
        kv_param *p = &t->policy.params[t->policy.n_params++];
        memset(p, 0, sizeof *p);
        snprintf(p->key, sizeof p->key, "prompt_rows");
        snprintf(p->val, sizeof p->val, "%d", DRY_PROMPT_ROWS);
        int rc = replay_estimate(t, &k->capped, &e);
        free(t);
        if (rc)
            k->capped = k->w;
    }
    d->n++;
    return k;
}

/* Adds run c to the estimate; 0, or 2 when out of memory (said). */
static int dry_add(dry_est *d, const run_cfg *c)
{
    const struct dry_key *k = dry_work(d, c, 1);
    if (!k) {
        cli_error("run", "out of memory");
        return 2;
    }
    double s = progress_cpu_estimate(c, &k->w);
    d->cpu_s += s;
    if (!k->w.prompt_rows && c->work.prompt_len >= DRY_LONG_PROMPT &&
        k->w.prompt_att_rows > DRY_PROMPT_ROWS) {
        if (!d->n_slow++)
            d->slow = c;
        d->slow_s += s;
        d->slow_capped_s += progress_cpu_estimate(c, &k->capped);
    }
    return 0;
}

/* The estimate and the warning after the listing. */
static void dry_report(const dry_est *d, size_t n)
{
    char t[32], per[32];
    progress_fmt_dur(t, sizeof t, d->cpu_s);
    progress_fmt_dur(per, sizeof per, n ? d->cpu_s / (double)n : 0);
    printf("estimated CPU time %s (%s a run on average; -j N runs N at once)\n", t, per);
    if (!d->n_slow)
        return;
    char a[32], b[32];
    progress_fmt_dur(a, sizeof a, d->slow_s);
    progress_fmt_dur(b, sizeof b, d->slow_capped_s);
    rdb_labels l;
    run_labels(d->slow, &l);
    fprintf(stderr,
            "mpcsim run: warning: %zu run%s (the first: #%zu %s, prompt_len %u) read the "
            "attention of every prompt row (prompt_rows 0, the default): %s of the estimate\n"
            "---> HINT: add 'prompt_rows: %d' to the policy entry (its selection then reads "
            "the last %d prompt rows; sim/policy/POLICIES.md): about %s\n",
            d->n_slow, d->n_slow == 1 ? "" : "s", d->slow->index, l.policy_label,
            d->slow->work.prompt_len, a, DRY_PROMPT_ROWS, DRY_PROMPT_ROWS, b);
}

/* Lists the runs (-v: their YAML) into the estimate; 0, or 2 after an error (said). */
static int dry_run(const scenario *s, const size_t *sel, size_t n, int verbose, dry_est *d)
{
    for (size_t i = 0; i < n; i++) {
        const run_cfg *c = &s->runs[sel[i]];
        if (verbose)
            printf("# run %zu  hash %s\n%s%s---\n", c->index, c->hash, c->yaml,
                   c->yaml[0] && c->yaml[strlen(c->yaml) - 1] == '\n' ? "" : "\n");
        else
            print_summary_line(stdout, c);
        if (dry_add(d, c))
            return 2;
    }
    printf("%zu run%s\n", n, n == 1 ? "" : "s");
    return 0;
}

/* ---- recording the results as they come ------------------------------------------------ */

typedef struct sweep {
    const run_cfg *const *run; /* the runs to do, in order */
    size_t n;
    rdb *db;
    progress *pg;
    int tty;      /* stderr is a terminal (a bar is drawn) */
    size_t raced; /* runs another process stored while we ran them */
    int db_rc;    /* first database error */
    errbuf db_err;
} sweep;

/* "#12 llama-2-7b semi2k wan h2o": what the progress shows of a run in flight. */
static void run_name(const run_cfg *c, char *out, size_t n)
{
    rdb_labels l;
    run_labels(c, &l);
    /* truncated to what the progress line shows anyway */
    snprintf(out, n, "#%zu %.30s %.24s %.24s %.60s", c->index, l.model, l.protocol_label, l.network,
             l.policy_label);
}

static void sweep_begin(sweep *sw, size_t i)
{
    char name[160];
    run_name(sw->run[i], name, sizeof name);
    progress_begin(sw->pg, i, name);
}

/* Stores a finished run; reports a failed run on stderr. */
static void sweep_record(void *ctx, pool_result *j)
{
    sweep *sw = ctx;
    const run_cfg *c = sw->run[j->pos];
    if (j->rc) {
        if (sw->tty)
            fputs("\r\033[K", stderr); /* the bar's line, redrawn after */
        fprintf(stderr, "mpcsim run: error: run #%zu of %s (%s) failed: %s\n", c->index,
                c->scenario, c->hash, j->err.msg);
    }
    errbuf e;
    int stored = 1;
    int rc = run_row_store(sw->db, c, j, &stored, &e);
    if (!rc && !stored)
        sw->raced++; /* a concurrent process has it ok: not a failure of the sweep */
    if (rc && !sw->db_rc) {
        sw->db_rc = rc;
        sw->db_err = e;
    }
    progress_end(sw->pg, j->pos, j->rc != 0 && stored);
}

static int sweep_stopped(void *ctx) { return ((sweep *)ctx)->db_rc != 0; }

static void sweep_started(void *ctx, size_t pos) { sweep_begin(ctx, pos); }

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

/* Opens the database, creating its folders. Returns an exit status, 0 to go on. */
static int open_db(const char *path, rdb **db)
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
    return 0;
}

/* Refuses to mix a fresh sweep into a database that already holds this scenario, drops done
 * runs from the selection under --resume, records the scenario. Returns an exit status. */
static int db_select(const run_opts *o, rdb *db, const char *path, const scenario *s, size_t *sel,
                     size_t *n)
{
    errbuf e;
    int64_t have = 0;
    int rc = rdb_scenario_runs(db, s->name, &have, &e);
    if (rc)
        goto fail;
    if (have > 0 && !o->resume) {
        cli_error("run",
                  "%s already holds %lld run%s of scenario '%s'\n"
                  "---> HINT: add --resume to run only what is missing, or write elsewhere "
                  "with -o",
                  path, (long long)have, have == 1 ? "" : "s", s->name);
        return 2;
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        int done = 0;
        if ((rc = rdb_run_done(db, s->runs[sel[i]].hash, &done, &e)))
            goto fail;
        if (!done)
            sel[k++] = sel[i];
    }
    *n = k;
    if ((rc = rdb_scenario_put(db, s->name, s->path, s->yaml, &e)))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "mpcsim run: error: %s\n", e.msg);
    return ms_err_exit_code(rc);
}

/* The scenarios of one invocation, each with its selection. */
typedef struct batch {
    scenario *s;
    size_t **sel, *n;
    size_t count;
} batch;

static void batch_free(batch *b)
{
    for (size_t i = 0; i < b->count; i++) {
        free(b->sel[i]);
        scn_free(&b->s[i]);
    }
    free(b->s);
    free(b->sel);
    free(b->n);
}

typedef struct hash_ref {
    const char *hash;
    size_t scn, pos;
} hash_ref;

static int by_ref(const void *a, const void *b)
{
    const hash_ref *x = a, *y = b;
    int c = strcmp(x->hash, y->hash);
    if (c)
        return c;
    if (x->scn != y->scn)
        return x->scn < y->scn ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* A run two scenarios share (the same resolved config) runs once, for the first of them. */
static int dedupe_across(batch *b)
{
    size_t total = 0;
    for (size_t i = 0; i < b->count; i++)
        total += b->n[i];
    hash_ref *r = malloc((total + 1) * sizeof *r);
    if (!r)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < b->count; i++)
        for (size_t j = 0; j < b->n[i]; j++)
            r[k++] = (hash_ref){b->s[i].runs[b->sel[i][j]].hash, i, j};
    qsort(r, total, sizeof *r, by_ref);
    for (size_t j = 1; j < total; j++)
        if (!strcmp(r[j].hash, r[j - 1].hash))
            b->sel[r[j].scn][r[j].pos] = SIZE_MAX;
    free(r);
    for (size_t i = 0; i < b->count; i++) {
        size_t m = 0;
        for (size_t j = 0; j < b->n[i]; j++)
            if (b->sel[i][j] != SIZE_MAX)
                b->sel[i][m++] = b->sel[i][j];
        b->n[i] = m;
    }
    return 0;
}

/* Loads and checks every scenario before anything runs. Returns an exit status. */
static int batch_load(const run_opts *o, batch *b)
{
    size_t n = o->n_scenarios;
    b->s = calloc(n, sizeof *b->s);
    b->sel = calloc(n, sizeof *b->sel);
    b->n = calloc(n, sizeof *b->n);
    if (!b->s || !b->sel || !b->n) {
        cli_error("run", "out of memory");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *path = o->scenario[i];
        if (access(path, R_OK)) {
            cli_error("run", "cannot read %s: %s", path, strerror(errno));
            return 2;
        }
        errbuf e;
        int rc = scn_load(path, NULL, &b->s[i], &e);
        if (rc) {
            fprintf(stderr, "%s\n", e.msg);
            return ms_err_exit_code(rc);
        }
        b->count = i + 1;
        if (!(b->sel[i] = calloc(b->s[i].n_runs + 1, sizeof *b->sel[i]))) {
            cli_error("run", "out of memory");
            return 1;
        }
        b->n[i] = select_runs(&b->s[i], o, b->sel[i], &e, &rc);
        if (rc) {
            fprintf(stderr, "%s\n", e.msg);
            return ms_err_exit_code(rc);
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(b->s[j].name, b->s[i].name)) {
                cli_error("run",
                          "%s and %s are both scenario '%s'\n---> HINT: give each "
                          "scenario its own name: key",
                          b->s[j].path, b->s[i].path, b->s[i].name);
                return 2;
            }
    }
    if (n > 1 && dedupe_across(b)) {
        cli_error("run", "out of memory");
        return 1;
    }
    return 0;
}

/* The command that resumes this sweep, for the interrupt line. */
static void resume_hint(const run_opts *o, const char *db, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "mpcsim run");
    for (int i = 0; i < o->n_args && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, " %s", o->args[i]);
    if (k < n && o->shard_n)
        k += (size_t)snprintf(out + k, n - k, " --shard %lu/%lu", o->shard_k, o->shard_n);
    if (k < n)
        snprintf(out + k, n - k, " -o %s --resume", db);
}

static int run_sweep(const run_opts *o, batch *b, const char *path)
{
    rdb *db = NULL;
    int status = open_db(path, &db);
    if (status)
        return status;
    size_t n_sel = 0, n = 0;
    for (size_t i = 0; i < b->count; i++)
        n_sel += b->n[i];
    for (size_t i = 0; i < b->count && !status; i++)
        status = db_select(o, db, path, &b->s[i], b->sel[i], &b->n[i]);
    for (size_t i = 0; i < b->count; i++)
        n += b->n[i];
    run_cfg **runs = status ? NULL : calloc(n + 1, sizeof *runs);
    double *w = status ? NULL : calloc(n + 1, sizeof *w);
    if (!status && (!runs || !w)) {
        cli_error("run", "out of memory");
        status = 1;
    }
    if (status) {
        free(runs);
        free(w);
        rdb_close(db);
        return status;
    }
    size_t k = 0;
    dry_est est = {0}; /* the ETA's weights: each run's estimated CPU time, as --dry-run's */
    for (size_t i = 0; i < b->count; i++)
        for (size_t j = 0; j < b->n[i]; j++) {
            runs[k] = &b->s[i].runs[b->sel[i][j]];
            const struct dry_key *dk = dry_work(&est, runs[k], 0);
            double cpu = dk ? progress_cpu_estimate(runs[k], &dk->w) : 0;
            /* else the cruder weight, about seconds at 1e-4 of it on a 7B run */
            w[k] = cpu > 0 ? cpu : progress_weight(runs[k]) * 1e-4;
            k++;
        }
    free(est.k);
    char hint[2048];
    resume_hint(o, path, hint, sizeof hint);
    int tty = isatty(STDERR_FILENO);
    sweep sw = {.run = (const run_cfg *const *)runs, .n = n, .db = db, .tty = tty && !o->quiet};
    double t0 = pool_now_s();
    if (n == 0 && !o->quiet)
        printf("%s: nothing to run (%zu of %zu runs already recorded)\n", path, n_sel, n_sel);
    if (n > 0)
        sw.pg = progress_start(n, w, o->jobs, tty, o->quiet, o->progress_s, hint);
    uint32_t *board = n > 0 ? pool_board_new(n) : NULL; /* positions, from the workers */
    if (sw.pg && board)
        progress_board(sw.pg, board);
    pool_sink sink = {sweep_record, sweep_stopped, &sw, sweep_started, board};
    pool_run_list((const run_cfg *const *)runs, n, o->jobs, &sink);
    size_t done = progress_done(sw.pg), failed = progress_failed(sw.pg);
    progress_stop(sw.pg);
    pool_board_free(board, n);
    if (sw.db_rc)
        fprintf(stderr, "mpcsim run: error: %s\n", sw.db_err.msg);
    if (n > 0 && !o->quiet)
        printf("%s: %zu run%s recorded (%zu failed, %zu already there) in %.1f s\n", path,
               done - failed - sw.raced, done - failed - sw.raced == 1 ? "" : "s", failed,
               n_sel - n + sw.raced, pool_now_s() - t0);
    if (rdb_close(db) && !sw.db_rc)
        sw.db_rc = MS_ERR_DB;
    free(runs);
    free(w);
    return sw.db_rc || failed || done < n ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int st = run_parse(argc, argv, &o);
    if (st) {
        run_opts_free(&o);
        return st == 1 ? 0 : 2;
    }
    batch b = {0};
    st = batch_load(&o, &b);
    char path[1024] = "", other[1024];
    for (size_t i = 0; !st && !o.dry_run && i < b.count; i++) { /* one database for all */
        db_path_for(&o, &b.s[i], i ? other : path, sizeof path);
        if (i && strcmp(other, path)) {
            cli_error("run",
                      "%s writes to %s, %s to %s\n---> HINT: give the database for "
                      "all of them with -o",
                      b.s[0].path, path, b.s[i].path, other);
            st = 2;
        }
    }
    if (!st && o.dry_run) {
        size_t total = 0;
        dry_est d = {0};
        for (size_t i = 0; !st && i < b.count; i++) {
            if (b.count > 1)
                printf("# %s (scenario %s)\n", b.s[i].path, b.s[i].name);
            st = dry_run(&b.s[i], b.sel[i], b.n[i], o.verbose, &d);
            total += b.n[i];
        }
        if (!st && b.count > 1)
            printf("%zu runs in %zu scenarios\n", total, b.count);
        if (!st)
            dry_report(&d, total);
        free(d.k);
    } else if (!st) {
        st = run_sweep(&o, &b, path);
        if (!st && !o.shard_n) /* a shard holds part of the runs: its figures would too */
            st = run_figures(b.s, b.count, path);
    }
    batch_free(&b);
    run_opts_free(&o);
    return st;
}

/* bench_sweep.c — a 500-run sweep with `mpcsim run -j 2` (target: under 60 s on 2 cores), then
 * a --resume pass that finds nothing to do, a report and a 2-shard merge. Prints figures. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[128];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs mpcsim with argv (NULL-terminated) in dir, stdout to /dev/null; exit status or -1. */
static int mpcsim(char *const argv[])
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(dir) || !freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* 2 protocols × 2 networks × 25 prompt lengths × 5 seeds = 500 runs of llama-2-7b decoding
 * 32 tokens (every 4th step costed exactly) with the full cache (no trace needed). */
static int write_scenario(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "format: 1\n"
               "name: bench\n"
               "model: llama-2-7b\n"
               "protocol: [semi2k, aby3]\n"
               "network: [lan, wan]\n"
               "seed: [1, 2, 3, 4, 5]\n"
               "policies: [full]\n"
               "workload: {decode_len: 32, decode_stride: 4, prompt_len: [");
    for (int i = 0; i < 25; i++)
        fprintf(f, "%s%d", i ? ", " : "", 256 + 128 * i);
    fprintf(f, "]}\n");
    return fclose(f);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

int main(void)
{
    const char *b = getenv("MPCSIM_BIN");
    if (!b) {
        fprintf(stderr, "bench_sweep: set MPCSIM_BIN (make bench does)\n");
        return 2;
    }
    char *bin = (char *)b;
    snprintf(dir, sizeof dir, "/tmp/bench_sweep_XXXXXX");
    char path[256];
    snprintf(path, sizeof path, "%s/bench.yaml", mkdtemp(dir) ? dir : "/tmp");
    if (write_scenario(path))
        return 1;

    double t0 = now_s();
    char *run[] = {bin, "run", "bench.yaml", "-o", "bench.db", "-j", "2", "-q", NULL};
    int rc = mpcsim(run);
    double t_sweep = now_s() - t0;
    printf("sweep: 500 runs, -j 2: %.2f s (%.1f runs/s), exit %d  [target < 60 s]\n", t_sweep,
           500 / t_sweep, rc);

    t0 = now_s();
    char *resume[] = {bin,  "run", "bench.yaml", "-o", "bench.db",
                      "-j", "2",   "--resume",   "-q", NULL};
    rc = mpcsim(resume);
    printf("resume with nothing left: %.3f s, exit %d\n", now_s() - t0, rc);

    t0 = now_s();
    char *report[] = {bin, "report", "bench.db", NULL};
    rc = mpcsim(report);
    printf("report of 500 runs: %.3f s, exit %d\n", now_s() - t0, rc);

    char *s1[] = {bin, "run", "bench.yaml", "-o", "s1.db", "--shard", "1/2", "-j", "2", "-q", NULL};
    char *s2[] = {bin, "run", "bench.yaml", "-o", "s2.db", "--shard", "2/2", "-j", "2", "-q", NULL};
    t0 = now_s();
    int r1 = mpcsim(s1), r2 = mpcsim(s2);
    printf("two shards of 250 runs, one after the other: %.2f s, exit %d %d\n", now_s() - t0, r1,
           r2);
    t0 = now_s();
    char *merge[] = {bin, "merge", "m.db", "s1.db", "s2.db", NULL};
    rc = mpcsim(merge);
    printf("merge of the 2 shards: %.3f s, exit %d\n", now_s() - t0, rc);

    snprintf(path, sizeof path, "%s/bench.db", dir);
    sqlite3 *h;
    sqlite3_stmt *st;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT count(*), sum(wall_s) FROM runs WHERE status = 'ok'", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        double busy = sqlite3_column_double(st, 1);
        printf("runs ok: %d; time inside run_execute: %.2f s in all, %.1f ms per run; "
               "workers busy %.0f%% of the sweep\n",
               sqlite3_column_int(st, 0), busy, 1e3 * busy / 500, 100 * busy / (2 * t_sweep));
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    printf("database size: %.1f kB (%.2f kB per run)\n", file_size(path) / 1e3,
           file_size(path) / 1e3 / 500);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}

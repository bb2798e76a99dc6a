/* bench_sweep.c — a 500-run sweep with `mpcsim run -j 2` (target: under 60 s on 2 cores), then
 * a --resume pass that finds nothing to do, a report and a 2-shard merge. Prints figures. */
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

/* 5 policies × 2 networks × 10 prompt lengths × 5 seeds = 500 runs. */
static int write_scenario(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "name: bench\n"
               "model: gpt2\n"
               "protocol: semi2k\n"
               "network: [lan, wan]\n"
               "policy: [full, h2o, streamingllm, snapkv, quest]\n"
               "prompt_len: [64, 96, 128, 160, 192, 224, 256, 320, 384, 512]\n"
               "decode_len: 4\n"
               "seed: [1, 2, 3, 4, 5]\n");
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
    char *resume[] = {bin, "run", "bench.yaml", "-o", "bench.db", "-j", "2", "--resume", "-q",
                      NULL};
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
    printf("two shards of 250 runs, one after the other: %.2f s, exit %d %d\n", now_s() - t0,
           r1, r2);
    t0 = now_s();
    char *merge[] = {bin, "merge", "m.db", "s1.db", "s2.db", NULL};
    rc = mpcsim(merge);
    printf("merge of the 2 shards: %.3f s, exit %d\n", now_s() - t0, rc);

    snprintf(path, sizeof path, "%s/bench.db", dir);
    printf("database size: %.1f kB (%.2f kB per run)\n", file_size(path) / 1e3,
           file_size(path) / 1e3 / 500);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}

/* bench_eviction.c — the policy runs of scenarios/eviction-7b-32k.yaml one at a time
 * (longchat-7b-32k, aby3, wan, synthetic trace seed 7, decode 32 with stride 16), CPU seconds
 * and peak resident memory of each `mpcsim run` child, at 4K and 32K prompt tokens; then the
 * whole shipped sweep with -j 2: wall time, CPU seconds of the process and its workers, and per
 * group (MPCSIM_GROUP_TIMES, sim/scenario/pool.c) its CPU seconds and its worker's peak memory
 * (a worker holds one group's runs and their shared rows at a time); the wall time an idle
 * 2-core machine would take is the largest worker's CPU seconds, printed with the load average
 * the figures were taken at.
 * MPCSIM_BENCH_P="4096 32000" picks the prompt lengths, MPCSIM_BENCH_SWEEP=0 skips the sweep.
 * Prints figures; never fails on timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Runs argv in dir (stderr to errpath unless NULL); CPU seconds (user + system) and max RSS
 * (MiB) of the child. */
static int spawn(char **argv, const char *errpath, double *cpu, double *rss_mib)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(dir))
            _exit(126);
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        if (errpath && !freopen(errpath, "w", stderr))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st))
        return -1;
    *cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
    *rss_mib = ru.ru_maxrss / 1024.0;
    return WEXITSTATUS(st);
}

/* The shipped scenario's policies, one value of each swept parameter. */
static const char *const policies[][2] = {
    {"full", "full"},
    {"streamingllm", "{name: streamingllm, sink: 4, recent: 2000, metric_stride: 16}"},
    {"h2o", "{name: h2o, heavy: 1024, recent: 1024, prompt_rows: 256, metric_stride: 16}"},
    {"snapkv", "{name: snapkv, capacity: 1024, metric_stride: 16}"},
    {"quest", "{name: quest, budget: 1024, metric_stride: 16}"},
    {"mpcache", "{name: mpcache, ratio2: 0.1, prompt_rows: 256, metric_stride: 16}"},
};

static int write_run(const char *policy, unsigned P)
{
    char path[128];
    snprintf(path, sizeof path, "%s/one.yaml", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "format: 1\nname: one\nmodel: longchat-7b-32k\nprotocol: aby3\nnetwork: wan\n"
            "trace: {source: synth}\nseed: 7\n"
            "workload: {prompt_len: %u, decode_len: 32, decode_stride: 16}\n"
            "policies:\n  - %s\n",
            P, policy);
    return fclose(f);
}

/* The 1-minute load average, or -1. */
static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* The whole shipped sweep with -j 2, its groups as the workers report them. */
static void sweep(char *bin, const char *data)
{
    char scn[1024], times[128], db[128];
    snprintf(scn, sizeof scn, "%s/scenarios/eviction-7b-32k.yaml", data);
    snprintf(times, sizeof times, "%s/groups.txt", dir);
    snprintf(db, sizeof db, "%s/sweep.db", dir);
    char *argv[] = {bin, "run", scn, "-o", "sweep.db", "-j", "2", "-q", NULL};
    double cpu = 0, rss = 0, l0 = loadavg(), t0 = now_s();
    setenv("MPCSIM_GROUP_TIMES", "1", 1);
    int rc = spawn(argv, times, &cpu, &rss);
    unsetenv("MPCSIM_GROUP_TIMES");
    double wall = now_s() - t0, l1 = loadavg();
    /* the workers' CPU and peak memory are in the parent's rusage (it reaps them) */
    printf("sweep eviction-7b-32k.yaml, -j 2 (36 runs; runs sharing a trace and prompt length "
           "run as one group):\n%8s %7s %9s %9s %9s\n",
           "runs", "P", "CPU s", "peak MiB", "worker");
    long pid[8] = {0};
    double per[8] = {0}, sum = 0;
    int nw = 0;
    FILE *f = fopen(times, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        size_t n;
        unsigned P;
        double c, w, peak;
        long p;
        if (sscanf(line,
                   "mpcsim run: group of %zu run%*[s] at prompt %u: %lf CPU s, %lf s wall, "
                   "peak %lf MiB, process %ld",
                   &n, &P, &c, &w, &peak, &p) != 6 &&
            sscanf(line,
                   "mpcsim run: group of %zu run at prompt %u: %lf CPU s, %lf s wall, "
                   "peak %lf MiB, process %ld",
                   &n, &P, &c, &w, &peak, &p) != 6) {
            fputs(line, stdout); /* an error message */
            continue;
        }
        int k = 0;
        while (k < nw && pid[k] != p)
            k++;
        if (k == nw && nw < 8)
            pid[nw++] = p;
        if (k < 8)
            per[k] += c;
        sum += c;
        printf("%8zu %7u %9.2f %9.0f %9d\n", n, P, c, peak, k + 1);
    }
    if (f)
        fclose(f);
    double most = 0;
    for (int k = 0; k < nw; k++) {
        printf("  worker %d: %.1f CPU s\n", k + 1, per[k]);
        most = per[k] > most ? per[k] : most;
    }
    printf("  %.1f s wall at load average %.1f -> %.1f [target < 60 s on an idle 2-core "
           "machine]; %.1f CPU s in all (%.1f in the groups), max RSS %.0f MiB (a worker's "
           "largest group); exit %d\n"
           "  idle 2-core estimate: %.1f s (the busiest worker's CPU s)\n",
           wall, l0, l1, cpu, sum, rss, rc, most);
    unlink(db);
    unlink(times);
}

int main(void)
{
    const char *b = getenv("MPCSIM_BIN"), *data = getenv("MPCSIM_DATA");
    if (!b || !data) {
        fprintf(stderr, "bench_eviction: set MPCSIM_BIN and MPCSIM_DATA (make bench does)\n");
        return 2;
    }
    char *bin = (char *)b;
    snprintf(dir, sizeof dir, "/tmp/bench_eviction_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const char *plist = getenv("MPCSIM_BENCH_P");
    char pbuf[128];
    snprintf(pbuf, sizeof pbuf, "%s", plist ? plist : "4096 32000");
    printf("eviction-7b-32k policies, one run each (CPU s = user + system of the child):\n");
    printf("%-14s %7s %9s %9s %5s\n", "policy", "P", "CPU s", "RSS MiB", "exit");
    for (char *tok = strtok(pbuf, " "); tok; tok = strtok(NULL, " ")) {
        unsigned P = (unsigned)strtoul(tok, NULL, 10);
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
            if (write_run(policies[i][1], P))
                return 1;
            char *argv[] = {bin, "run", "one.yaml", "-o", "one.db", "-q", NULL};
            double cpu = 0, rss = 0;
            char db[128];
            snprintf(db, sizeof db, "%s/one.db", dir);
            unlink(db);
            int rc = spawn(argv, NULL, &cpu, &rss);
            printf("%-14s %7u %9.2f %9.1f %5d\n", policies[i][0], P, cpu, rss, rc);
            fflush(stdout);
            unlink(db);
        }
    }
    const char *sw = getenv("MPCSIM_BENCH_SWEEP");
    if (!sw || strcmp(sw, "0"))
        sweep(bin, data);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}

/* cmd_calibrate.c — `mpcsim calibrate`: measure this machine's local rates into a profile. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "sim/engine/machine.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim calibrate [-o FILE] [--seconds S] [--threads N] [--name NAME]\n\n"
            "Measures one core's rates for the local work of MPC protocols — 64-bit ring\n"
            "matmul multiply-accumulates, element-wise ring operations, AES-128-CTR PRG bytes\n"
            "(OpenSSL EVP) — and writes a machine profile YAML (stdout without -o). With\n"
            "--threads N it runs the same kernels again split over N threads (matmul rows,\n"
            "element ranges, PRG streams; the threads join after every repetition, as a\n"
            "parallel loop does) and records each kind's parallel efficiency: the aggregate\n"
            "rate over N times one core's. The compute model scales a round's work by it\n"
            "(sim/engine/SIMULATION.md, \"Compute\"). Scenarios and `mpcsim cost --profile`\n"
            "name profiles in protocols/machines/.\n\n"
            "options:\n"
            "  -o, --output FILE   write the profile to FILE\n"
            "  -s, --seconds S     time budget for all measurements (default 3)\n"
            "  -t, --threads N     cores a party uses: measure on N threads (1..256, default 1)\n"
            "  -n, --name NAME     profile name (default: calibrated)\n"
            "  -h, --help          this help\n");
}

/* "model name : …" from /proc/cpuinfo, for the profile's provenance. */
static void cpu_model(char *out, size_t sz)
{
    snprintf(out, sz, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c++;
            while (*c == ' ')
                c++;
            c[strcspn(c, "\n\"")] = '\0';
            snprintf(out, sz, "%s", c);
            break;
        }
    }
    fclose(f);
}

int cmd_calibrate(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"seconds", required_argument, 0, 's'},
                                         {"name", required_argument, 0, 'n'},
                                         {"threads", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL, *name = "calibrated";
    double secs = 3;
    long long threads = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:s:n:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 's':
            if (parse_double(optarg, &secs) || !(secs > 0) || secs > 3600) {
                cli_error("calibrate", "--seconds wants a number in (0, 3600], not '%s'", optarg);
                return 2;
            }
            break;
        case 'n':
            name = optarg;
            break;
        case 't':
            if (parse_i64(optarg, &threads) || threads < 1 || threads > 256) {
                cli_error("calibrate", "--threads wants an integer in 1..256, not '%s'", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        cli_error("calibrate", "unexpected argument '%s'", argv[optind]);
        usage(stderr);
        return 2;
    }
    machine_profile m;
    double rate_n[WK_N];
    if (machine_calibrate(&m, secs, (int)threads, rate_n) != MS_OK) {
        cli_error("calibrate", "a measurement failed (OpenSSL AES-128-CTR unavailable?)");
        return 1;
    }
    snprintf(m.name, sizeof m.name, "%s", name);
    errbuf e;
    int rc = machine_write(&m, out, &e);
    if (rc != MS_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    /* provenance, appended so the file says where its figures come from */
    FILE *f = out ? fopen(out, "a") : stdout;
    char cpu[256], date[32];
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    if (f) {
        fprintf(f, "cpu: \"%s\"\nmeasured: \"%s, mpcsim calibrate --seconds %g --threads %lld",
                cpu, date, secs, threads);
        if (threads > 1)
            fprintf(f, "; on %lld threads MAC %.4g/s, elem %.4g/s, PRG %.4g B/s", threads,
                    rate_n[WK_MAC], rate_n[WK_ELEM], rate_n[WK_PRG]);
        fputs("\"\n", f);
        if (out)
            fclose(f);
    }
    if (out)
        fprintf(stderr, "mpcsim calibrate: wrote %s (one core: MAC %.3g/s, elem %.3g/s, PRG "
                "%.3g B/s; on %d threads: efficiency %.2f, %.2f, %.2f)\n", out, m.rate[WK_MAC],
                m.rate[WK_ELEM], m.rate[WK_PRG], m.threads, m.par_eff[WK_MAC],
                m.par_eff[WK_ELEM], m.par_eff[WK_PRG]);
    return 0;
}

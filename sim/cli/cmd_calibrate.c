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
            "usage: mpcsim calibrate [-o FILE] [--seconds S] [--name NAME]\n\n"
            "Measures one core's rates for the local work of MPC protocols — 64-bit ring\n"
            "matmul multiply-accumulates, element-wise ring operations, AES-128-CTR PRG bytes\n"
            "(OpenSSL EVP) — and writes a machine profile YAML (stdout without -o). Scenarios\n"
            "and `mpcsim cost --profile` name profiles in protocols/machines/.\n\n"
            "options:\n"
            "  -o, --output FILE   write the profile to FILE\n"
            "  -s, --seconds S     time budget for all measurements (default 3)\n"
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
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL, *name = "calibrated";
    double secs = 3;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:s:n:h", opts, NULL)) != -1) {
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
    if (machine_calibrate(&m, secs) != MS_OK) {
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
        fprintf(f, "cpu: \"%s\"\nmeasured: \"%s, mpcsim calibrate --seconds %g, one core\"\n",
                cpu, date, secs);
        if (out)
            fclose(f);
    }
    if (out)
        fprintf(stderr, "mpcsim calibrate: wrote %s (MAC %.3g/s, elem %.3g/s, PRG %.3g B/s)\n",
                out, m.rate[WK_MAC], m.rate[WK_ELEM], m.rate[WK_PRG]);
    return 0;
}

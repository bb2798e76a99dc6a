/* cmd_calibrate.c — `mpcsim calibrate`: measure this machine's local rates into a profile. */
#include <float.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "opt.h"
#include "sim/engine/machine.h"

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim calibrate [-o FILE] [--seconds S] [--threads N] [--name NAME]\n\n"
               "Measures one core's rates for the local work of MPC protocols — 64-bit ring\n"
               "matmul multiply-accumulates, element-wise ring operations, AES-128-CTR PRG bytes\n"
               "(OpenSSL EVP) — and writes a machine profile YAML (stdout without -o). With\n"
               "--threads N it runs the same kernels again split over N threads (matmul rows,\n"
               "element ranges, PRG streams; the threads join after every repetition, as a\n"
               "parallel loop does) and records each kind's parallel efficiency: the aggregate\n"
               "rate over N times one core's. The compute model scales a round's work by it\n"
               "(sim/engine/SIMULATION.md, \"Compute\"). Scenarios and `mpcsim cost --profile`\n"
               "name profiles in protocols/machines/.\n\n"
               "options:\n");
    cli_help(c, f);
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
    const char *out = NULL, *name = "calibrated";
    double secs = 3;
    int threads = 1;
    const cli_opt opts[] = {
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &out,
         .arg = "FILE",
         .help = "write the profile to FILE"},
        {.name = "seconds",
         .short_name = 's',
         .kind = CLI_F64,
         .dest = &secs,
         .arg = "S",
         .lo = DBL_MIN,
         .hi = 3600,
         .want = "a number in (0, 3600]",
         .help = "time budget for all measurements (default 3)"},
        {.name = "threads",
         .short_name = 't',
         .kind = CLI_INT,
         .dest = &threads,
         .arg = "N",
         .lo = 1,
         .hi = 256,
         .help = "cores a party uses: measure on N threads\n(1..256, default 1)"},
        {.name = "name",
         .short_name = 'n',
         .kind = CLI_STR,
         .dest = &name,
         .arg = "NAME",
         .help = "profile name (default: calibrated)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"calibrate", opts, sizeof opts / sizeof opts[0], 22, 0};
    int rc = cli_parse_cmd(&cmd, argc, argv, NULL, NULL, usage);
    if (rc)
        return rc == CLI_HELP_ASKED ? 0 : rc;
    machine_profile m;
    double rate_n[WK_N];
    if (machine_calibrate(&m, secs, threads, rate_n) != MS_OK) {
        cli_error("calibrate", "a measurement failed (OpenSSL AES-128-CTR unavailable?)");
        return 1;
    }
    snprintf(m.name, sizeof m.name, "%s", name);
    errbuf e;
    rc = machine_write(&m, out, &e);
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
        fprintf(f, "cpu: \"%s\"\nmeasured: \"%s, mpcsim calibrate --seconds %g --threads %d", cpu,
                date, secs, threads);
        if (threads > 1)
            fprintf(f, "; on %d threads MAC %.4g/s, elem %.4g/s, PRG %.4g B/s", threads,
                    rate_n[WK_MAC], rate_n[WK_ELEM], rate_n[WK_PRG]);
        fputs("\"\n", f);
        if (out)
            fclose(f);
    }
    if (out)
        fprintf(stderr,
                "mpcsim calibrate: wrote %s (one core: MAC %.3g/s, elem %.3g/s, PRG "
                "%.3g B/s; on %d threads: efficiency %.2f, %.2f, %.2f)\n",
                out, m.rate[WK_MAC], m.rate[WK_ELEM], m.rate[WK_PRG], m.threads, m.par_eff[WK_MAC],
                m.par_eff[WK_ELEM], m.par_eff[WK_PRG]);
    return 0;
}

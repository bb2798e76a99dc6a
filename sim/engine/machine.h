/* machine.h — the compute model: a machine profile gives one core's local rates per kind of
 * work (64-bit ring MACs in matmuls, element-wise ring ops, PRG bytes), the cores a party uses,
 * and how each kind scales over them (sim/engine/SIMULATION.md, "Compute"). `mpcsim calibrate`
 * measures them and writes a profile YAML; scenarios name one (protocols/machines/ ships
 * this machine's `default` and the server profiles of the papers' hardware). */
#ifndef MPCSIM_MACHINE_H
#define MPCSIM_MACHINE_H

#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/program/proto.h"

/* Work below this many units per thread is not split further: SPU's pforeach chunks
 * element-wise loops into tasks of at least kMinTaskSize = 50000 elements
 * (libspu/core/parallel_utils.h, computeTaskSize) and Eigen's GEMM gives each thread at least
 * kMinTaskSize = 50000 multiply-adds (Eigen/src/Core/products/Parallelizer.h,
 * parallelize_gemm). */
#define MACHINE_GRAIN_DEFAULT 50000.0

typedef struct machine_profile {
    char name[64];
    double rate[WK_N];    /* one core's units per second: WK_MAC, WK_ELEM, WK_PRG */
    int threads;          /* cores a party uses */
    double par_eff[WK_N]; /* parallel efficiency of each kind on `threads` cores: aggregate rate
                           * / (threads · one core's rate); 1 = linear scaling */
    double grain;         /* smallest chunk of work one thread takes (units) */
} machine_profile;

/* A profile by name (protocols/machines/<name>.yaml under the data folder) or by path. */
int machine_load(const char *name_or_path, machine_profile *m, errbuf *e);
/* The keys of a profile file (for readers and `mpcsim list keys`). */
const struct ys_schema *machine_schema(void);
void machine_default(machine_profile *m);
/* Speed-up of `work` units of kind k over one core: work is cut into
 * c = min(threads, ceil(work / grain)) chunks; c = 1 runs on one core (1), otherwise
 * max(1, c · par_eff[k]). */
double machine_speedup(const machine_profile *m, int k, double work);
/* Seconds of `work[WK_N]` units on the profile (Σ_k work_k / (rate_k · speedup_k)). */
double machine_seconds(const machine_profile *m, const double *work);

/* Measures one core's rates; with threads > 1 also runs every kernel split over `threads`
 * POSIX threads (as SPU's parallel loops split it) and records the measured efficiencies.
 * measured_rate_n (may be NULL) receives the aggregate rates on `threads` threads. */
int machine_calibrate(machine_profile *m, double seconds_budget, int threads,
                      double measured_rate_n[WK_N]);
int machine_write(const machine_profile *m, const char *path, errbuf *e);

#endif

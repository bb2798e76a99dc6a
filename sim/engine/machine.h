/* machine.h — the compute model: a machine profile gives local rates per kind of work (64-bit
 * ring MACs in matmuls, element-wise ring ops, PRG bytes). `mpcsim calibrate` measures them
 * and writes a profile YAML; scenarios name one (protocols/machines/default.yaml ships). */
#ifndef MPCSIM_MACHINE_H
#define MPCSIM_MACHINE_H

#include "protocols/base/err.h"
#include "protocols/program/proto.h"

typedef struct machine_profile {
    char name[64];
    double rate[WK_N]; /* units per second: WK_MAC, WK_ELEM, WK_PRG */
    int threads;       /* cores a party uses */
} machine_profile;

/* A profile by name (protocols/machines/<name>.yaml under the data folder) or by path. */
int machine_load(const char *name_or_path, machine_profile *m, errbuf *e);
/* The keys of a profile file (for readers and `mpcsim list keys`). */
const struct ys_schema *machine_schema(void);
void machine_default(machine_profile *m);
int machine_calibrate(machine_profile *m, double seconds_budget);
int machine_write(const machine_profile *m, const char *path, errbuf *e);

#endif

/* kvparam.h — one KEY: VALUE parameter as a scenario gives it to a policy or a trace source,
 * with where it was written, so the module that reads it can point its errors at the line. */
#ifndef MPCSIM_KVPARAM_H
#define MPCSIM_KVPARAM_H

typedef struct kv_param {
    char key[48];
    char val[208];
    int line, col; /* where it came from in the scenario (1-based), for errors */
} kv_param;

#endif

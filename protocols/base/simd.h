/* simd.h — the vector types (GCC/Clang vector extensions: four lanes are SSE2 on x86-64, NEON
 * elsewhere; the 16-lane ones are for kernels compiled for AVX-512) and the one CPU-feature
 * detector that picks a kernel's wide path at run time. */
#ifndef MPCSIM_SIMD_H
#define MPCSIM_SIMD_H

#include <stdint.h>

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32))); /* two SSE2 registers on x86-64 */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

enum ms_cpu_feature {
    MS_CPU_AVX512F,  /* AVX-512 Foundation */
    MS_CPU_AVX512DQ, /* AVX-512 F and DQ (64-bit lane multiplies) */
    MS_CPU_F16C,     /* F16C and AVX with the OS saving the YMM state */
    MS_CPU_BMI2,     /* PEXT/PDEP */
    MS_CPU_AVX2,     /* AVX2 with the OS saving the YMM state */
    MS_CPU_N
};

/* 1 when this CPU has the feature (asked once, then cached), 0 otherwise and off x86-64. */
int ms_cpu_has(enum ms_cpu_feature f);

#endif

/* simd.c — the CPU-feature detector (simd.h). */
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* F16C and AVX from CPUID leaf 1 with the OS saving the YMM state (XCR0 bits 1–2): clang's
 * __builtin_cpu_supports knows no "f16c". */
static int cpu_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    const unsigned need = bit_F16C | bit_AVX | bit_OSXSAVE;
    if ((c & need) != need)
        return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6) == 6;
}

static int cpu_ask(enum ms_cpu_feature f)
{
    __builtin_cpu_init();
    switch (f) {
    case MS_CPU_AVX512F: return __builtin_cpu_supports("avx512f") != 0;
    case MS_CPU_AVX512DQ:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    case MS_CPU_F16C: return cpu_f16c();
    case MS_CPU_BMI2: return __builtin_cpu_supports("bmi2") != 0;
    case MS_CPU_AVX2: return __builtin_cpu_supports("avx2") != 0;
    default: return 0;
    }
}

int ms_cpu_has(enum ms_cpu_feature f)
{
    static int have[MS_CPU_N] = {-1, -1, -1, -1, -1};
    if ((unsigned)f >= MS_CPU_N)
        return 0;
    if (have[f] < 0)
        have[f] = cpu_ask(f);
    return have[f];
}
#else
int ms_cpu_has(enum ms_cpu_feature f)
{
    (void)f;
    return 0;
}
#endif

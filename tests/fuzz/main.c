/* main.c — one fuzz target (FUZZ_TARGET, e.g. -DFUZZ_TARGET=fuzz_npy) as a libFuzzer entry. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    FUZZ_TARGET(data, n);
    return 0;
}

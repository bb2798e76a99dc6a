/* clifix.c — scenario files the CLI suites write. */
#include "clifix.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"

/* A sweep of n_prompts × 2 protocols × 2 networks runs (scenarios/README.md). Fast runs: gpt2,
 * 4 generated tokens. Slow runs (for the kill test, ~0.1–0.2 s each in a release build):
 * llama-2-7b, 64 generated tokens each simulated exactly. */
void clifix_write_sweep(const char *path, const char *name, int n_prompts, int slow)
{
    static const char *const prompts[] = {"64", "96", "128", "160", "192", "224", "256", "288"};
    char buf[2048], list[256] = "";
    for (int i = 0; i < n_prompts && i < 8; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 prompts[i]);
    snprintf(buf, sizeof buf,
             "format: 1\n"
             "name: %s\n"
             "seed: 11\n"
             "model: %s\n"
             "protocol: [semi2k, aby3]\n"
             "network: [lan, wan]\n"
             "policies: [full]\n"
             "workload: {prompt_len: [%s], decode_len: %s}\n",
             name, slow ? "llama-2-7b" : "gpt2", list, slow ? "256, decode_stride: 1" : "4");
    th_write(path, buf);
}

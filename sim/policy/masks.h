/* masks.h — keep masks from outside mpcsim (sim/policy/policy_replay_masks.c): keep.npy beside an
 * npy trace, int32 [L][T][Hkv][T] (sim/trace/TRACE_FORMAT.md "Keep masks"). */
#ifndef MPCSIM_POLICY_MASKS_H
#define MPCSIM_POLICY_MASKS_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* Checks dir/keep.npy: its header (int32, 4 dimensions, L layers and Hkv KV heads, at least
 * need positions) and that the file holds all of its data (sizes overflow-checked). Sets *T
 * (its positions), *off (the data's offset) and, fd not NULL, *fd (an open descriptor the
 * caller closes); path receives the file's name. Errors read "PATH: error: …". */
int masks_open(const char *dir, uint32_t L, uint32_t Hkv, uint32_t need, int *fd, uint64_t *T,
               uint64_t *off, char *path, size_t cap, errbuf *e);
/* A replay_masks entry's parameters: none given in the scenario (line > 0; the defaults it
 * fills in have none) of another policy than its cost_as (file:line:col). */
int masks_check_params(const kv_param *kv, size_t n, const char *path, errbuf *e);
/* The parameters replay_masks builds (cost_as and the cost policies'), for a test against
 * policy_replay_masks.n_params. */
size_t masks_n_params(void);

#endif

/* group.h — the runs of a sweep that replay the same trace, driven together.
 *
 * Runs with the same model, trace (source, path, parameters), seed, prompt length and decode
 * length read the same full-cache attention rows: a group executes them in one pass over the
 * trace's prompt, position by position (every run observes prompt position p, then p + 1, …),
 * so each prompt row is computed once for all of them (trace_share_rows). The decode then goes
 * run by run (each run's decode steps, then it is reported, then the next run's), so a sweep
 * killed inside a group keeps the runs that finished; the decode rows are computed again for
 * each run (the prompt's rows are the bulk of a long-context group). Each run's own work, and
 * so its result, is that of running it alone (run_execute): the trace is a fixed function of
 * the position, whoever reads it first. */
#ifndef MPCSIM_GROUP_H
#define MPCSIM_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "runner.h"

/* 1 when a and b read the same trace rows at the same positions (may share a group). */
int run_same_trace(const run_cfg *a, const run_cfg *b);

/* Called as each run of a group finishes (its result complete, or rc an error in e), in the
 * order they finish; res is the caller's res[i]. */
typedef void (*run_group_done)(void *ctx, size_t i, int rc, const errbuf *e);

/* Executes cfg[0..n) (run_same_trace of one another) together into res[i] (initialized by the
 * caller); calls done for each. With progress slots set (run_group_progress), run i's slot
 * holds {positions done, positions in all}: the prompt positions replayed, then the decode
 * steps, prompt_len + decode_len in all. */
void run_execute_group(const run_cfg *const *cfg, size_t n, run_result *res, run_group_done done,
                       void *ctx);
/* The progress slots of the next run_execute_group's runs (slot[i]: two words, stored with
 * relaxed atomics: a parent process may read them from shared memory), or NULL: none. */
void run_group_progress(uint32_t *const *slot);

#endif

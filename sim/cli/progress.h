/* progress.h — what `mpcsim run` says while a sweep runs: done and failed runs, the runs in
 * flight with their elapsed time, and an ETA from each run's expected cost. On a terminal a
 * bar redrawn every second; otherwise (a Slurm log, a pipe) one line every 10 s. A SIGINT or
 * SIGTERM prints how many runs are recorded and how to resume, then ends the process as the
 * signal would. */
#ifndef MPCSIM_PROGRESS_H
#define MPCSIM_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "sim/engine/runcfg.h"

/* A run's expected cost in arbitrary units, for the ETA when progress_cpu_estimate has none: the
 * steps it simulates (the prefill and the decode steps costed exactly, decode_stride apart) times
 * the layers, plus the trace replay's attention work when the policy replays a trace. Only the
 * ratios between runs matter: the ETA is the remaining cost over the cost finished per second so
 * far. */
double progress_weight(const run_cfg *c);

/* A run's CPU time in seconds as `run --dry-run` estimates it, from the work it does: each
 * layer of each step it simulates, the keys of a synthetic or recorded trace it reads, and the
 * attention rows its replay computes (w: replay_estimate's count). Coefficients fitted on
 * llama-2-7b runs (prompt 1024..4000, decode 16..64; full, StreamingLLM, H2O with and without
 * prompt_rows, SnapKV) on a 2-core x86-64 machine; there within a factor of 2 of the measured
 * user time, Quest 4× over it (its re-read keys are not counted; BENCHMARKS.md). A rough
 * figure: another machine differs by its speed. The ETA of `run` weighs its runs by it too. */
struct replay_work;
double progress_cpu_estimate(const run_cfg *c, const struct replay_work *w);
/* "45s", "3:07", "1:02:03", "2d 03:04". */
void progress_fmt_dur(char *out, size_t n, double s);

typedef struct progress progress;

/* total runs; weights[i] of run i (copied; its estimated CPU seconds); workers: the runs in
 * flight at once. Until a run finishes, the ETA is the estimate over the workers, shown as
 * "~3:40"; then the remaining weight over the weight finished per second. tty: redraw a bar
 * (else a line every period_s); quiet: nothing printed but the interrupt line. resume_hint: the
 * command that resumes, for the interrupt line. Starts the printing thread and installs the
 * SIGINT/SIGTERM handlers. */
progress *progress_start(size_t total, const double *weights, int workers, int tty, int quiet,
                         double period_s, const char *resume_hint);
/* Run i (0-based) started / finished (recorded in the database); name: a short label. */
void progress_begin(progress *p, size_t i, const char *name);
void progress_end(progress *p, size_t i, int failed);
/* Stops the thread, restores the signal handlers, finishes the bar's line; frees p. */
void progress_stop(progress *p);
/* The runs' positions (pool_board_new: words 2i, 2i + 1 the positions run i has replayed and
 * has in all), shown beside each run in flight: "#13 … 45s 812/4096"; NULL: none. */
void progress_board(progress *p, const uint32_t *board);
/* The status line now: "12/36 runs (2 failed), elapsed 1:02, ETA 3:40". */
void progress_status(progress *p, char *out, size_t n);
/* Counts while running, for the summary. */
size_t progress_done(const progress *p);
size_t progress_failed(const progress *p);

#endif

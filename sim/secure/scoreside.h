/* scoreside.h — the score side of a selection on shares (protocol option gather: scores) in
 * the secure session's programs (scoreside.c).
 *
 * The secure session lowers a step, then splices the policy's ops into it (secpol.h), so the
 * lowering never sees the policy's per-step row gather and cannot lay the score side out as the
 * simulator does (models/lower.c attend_scores). scoreside_apply rewrites the spliced program
 * instead: each layer's row gather (lower_score_gather_width) and its attention become the
 * score side on the same one-hot, with the ops and shapes attend_scores costs (q·Kᵀ over the
 * C candidates and the new entry, the kept units' scores gathered by the one-hot, softmax over
 * the R kept entries and the new one, the probabilities scattered back by the transposed
 * one-hot, ·V over every candidate). */
#ifndef MPCSIM_SCORESIDE_H
#define MPCSIM_SCORESIDE_H

#include <stddef.h>
#include <stdint.h>

#include "models/model.h"
#include "protocols/base/err.h"
#include "protocols/program/op.h"

/* A row gather the rewrite took out: rows (b, m, n) = one-hot (b, m, k) · table (b, k, n). Its
 * rows are no longer computed on shares; the audit (validation only) opens the one-hot and the
 * table and forms them in the clear. */
typedef struct scoreside_gather {
    uint32_t rows, onehot, table;
    uint32_t b, m, k, n;
} scoreside_gather;

/* Rewrites every layer of the decode step's program p whose policy gathers rows per step. The
 * policy's rows tensor is still written — zero but for its carried columns (MPCache's pad mask
 * column, which its score mask reads) — so the policy's other ops run unchanged; the cache
 * tensors keep their new entry at row 0. An error (MS_ERR_INPUT) when a layer attends entries
 * outside its gather's candidates (their layout is not the score side's). *g (may be NULL)
 * receives the gathers taken out (malloc'd), *n_g their number. */
int scoreside_apply(const model_cfg *m, op_program *p, scoreside_gather **g, size_t *n_g,
                    errbuf *e);

/* The rows of gather g from its opened one-hot oh and table tab (ring integers): out (b·m·n). */
void scoreside_rows(const scoreside_gather *g, uint32_t table_batch, const uint64_t *oh,
                    const uint64_t *tab, uint64_t *out);

#endif

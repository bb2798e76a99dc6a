/* traceck.h — checks on an open trace shared by the trace and synthetic-trace suites. */
#ifndef MPCSIM_TESTS_TRACECK_H
#define MPCSIM_TESTS_TRACECK_H

#include <stdint.h>

#include "sim/trace/trace.h"

/* The largest difference, over the heads of layer, between the attention row the trace holds
 * for its current position and trace_attend over every key (asserts trace_attend succeeds). */
double th_att_vs_attend(trace *t, uint32_t layer);

#endif

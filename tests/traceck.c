/* traceck.c — checks on an open trace shared by the trace and synthetic-trace suites. */
#include "traceck.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

/* Every attention row of the current position equals trace_attend over all keys. */
double th_att_vs_attend(trace *t, uint32_t layer)
{
    const trace_shape *s = trace_get_shape(t);
    uint32_t pos = trace_pos(t), n = pos + 1;
    uint32_t *idx = malloc(n * sizeof *idx);
    float *p = malloc(n * sizeof *p);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    const float *att = trace_att(t, layer);
    double worst = 0;
    for (uint32_t h = 0; h < s->n_heads; h++) {
        ck_assert_int_eq(
            trace_attend(t, layer, h, trace_q(t, layer) + h * s->head_dim, idx, n, p, NULL), MS_OK);
        for (uint32_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(p[i] - att[h * n + i]));
    }
    free(idx);
    free(p);
    return worst;
}

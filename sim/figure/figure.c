/* figure.c — the data model of a figure (see figure.h). */
#include "figure.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

fig_unit fig_unit_pick(int kind, double max)
{
    if (kind == 's') {
        if (max < 1e-3)
            return (fig_unit){1e-6, "us"};
        if (max < 1)
            return (fig_unit){1e-3, "ms"};
        if (max < 120)
            return (fig_unit){1, "s"};
        if (max < 7200)
            return (fig_unit){60, "min"};
        if (max < 172800)
            return (fig_unit){3600, "h"};
        return (fig_unit){86400, "d"};
    }
    if (kind == 'B') {
        static const fig_unit u[] = {{1, "B"}, {1e3, "kB"}, {1e6, "MB"}, {1e9, "GB"}, {1e12, "TB"}};
        int k = 0;
        while (k < 4 && max >= u[k + 1].div)
            k++;
        return u[k];
    }
    return (fig_unit){1, ""};
}

int fig_xlog(const fig_cell *cl, int n, int net_axis)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (cl[i].nb) {
            lo = fmin(lo, cl[i].xmin);
            hi = fmax(hi, cl[i].xmax);
        }
    if (lo > 0 && hi / lo >= 4)
        return net_axis ? 10 : 2;
    return 0;
}

void fig_cell_xrange(const fig_cell *c, int xlog, double *lo, double *hi)
{
    double a = c->xmin, b = c->xmax;
    if (!c->nb)
        a = b = 1;
    if (a == b) {
        a = xlog ? a / 2 : a - (a ? fabs(a) / 2 : 1);
        b = xlog ? b * 2 : b + (b ? fabs(b) / 2 : 1);
    } else if (xlog) {
        a /= 1.25;
        b *= 1.25;
    } else {
        double pad = (b - a) * 0.05;
        a -= pad;
        b += pad;
    }
    *lo = a;
    *hi = b;
}

int fig_name_index(char *names, size_t stride, int *n, int max, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names + (size_t)i * stride, s))
            return i;
    if (*n == max)
        return -1;
    snprintf(names + (size_t)*n * stride, stride, "%s", s);
    return (*n)++;
}

void fig_bars_align(fig_bars *a, fig_bars *b)
{
    fig_bars t = *b;
    for (int l = 0; l < b->nl; l++)
        for (int k = 0; k < a->nc; k++) {
            b->v[l][k] = 0;
            for (int j = 0; j < t.nc; j++)
                if (!strcmp(t.cat[j], a->cat[k]))
                    b->v[l][k] = t.v[l][j];
        }
    b->nc = a->nc;
    memcpy(b->cat, a->cat, sizeof a->cat);
    int kept = 0;
    for (int k = 0; k < a->nc; k++) {
        double sum = 0;
        for (int l = 0; l < a->nl; l++)
            sum += a->v[l][k];
        for (int l = 0; l < b->nl; l++)
            sum += b->v[l][k];
        if (sum == 0)
            continue;
        for (fig_bars *x = a; x; x = x == a ? b : NULL) {
            for (int l = 0; l < x->nl; l++)
                x->v[l][kept] = x->v[l][k];
            memcpy(x->cat[kept], x->cat[k], sizeof x->cat[k]);
        }
        kept++;
    }
    a->nc = b->nc = kept;
}

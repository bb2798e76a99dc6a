/* figure.c — the data model of a figure (see figure.h). */
#include "figure.h"

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

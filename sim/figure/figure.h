/* figure.h — what every figure of sim/figure shares: the unit an axis is shown in, picked so
 * its largest value reads best. The figures: relplot.h (faceted points and lines), barplot.h
 * (faceted stacked bars); the database queries that fill them are in sim/cli. */
#ifndef MPCSIM_FIGURE_H
#define MPCSIM_FIGURE_H

/* An axis unit: values are divided by div and labelled name ("" when unitless). */
typedef struct fig_unit {
    double div;
    const char *name;
} fig_unit;

/* The unit in which the largest value max reads best. kind: 's' seconds (us … d), 'B' bytes
 * (B … TB, powers of 1000), anything else none. */
fig_unit fig_unit_pick(int kind, double max);

#endif

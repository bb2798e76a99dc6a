/* barplot.h — a faceted figure of horizontal stacked bars, drawn with gnuplot: a row of panels
 * per facet value, a column per measure (time, bytes), a bar per label in every panel of a row,
 * a stack of categories per bar with one colour per category throughout, and one legend of the
 * categories below the panels. Panels have a fixed plot area whatever the labels' length (the
 * canvas widens for them); each panel's axis starts at 0 in the unit its longest bar reads
 * best in.
 *
 * The caller fills a barplot (bp_index, bp_add), then bp_write writes one self-contained
 * gnuplot script (data inline). Nothing here reads a database. */
#ifndef MPCSIM_BARPLOT_H
#define MPCSIM_BARPLOT_H

#include <stdio.h>

#include "relplot.h"

#define BP_MAX_ROWS RP_MAX_FACETS
#define BP_MAX_COLS 4
#define BP_MAX_BARS 48
#define BP_MAX_CATS 16

typedef struct barplot {
    char title[256], subtitle[640];
    rp_axis ax[BP_MAX_COLS]; /* a column's measure: its label and kind ('s', 'B'); from 0 */
    int ncol;
    char row_name[BP_MAX_ROWS][RP_NAME];
    int nrow;
    char bar[BP_MAX_ROWS][BP_MAX_BARS][RP_NAME]; /* a row's bars, top to bottom */
    int nbar[BP_MAX_ROWS];
    char cat[BP_MAX_CATS][32];
    int cat_colour[BP_MAX_CATS]; /* the category's colour: an index into the palette */
    int ncat;
    double v[BP_MAX_ROWS][BP_MAX_COLS][BP_MAX_BARS][BP_MAX_CATS]; /* in the axis' base unit */
    int dropped; /* values past a limit (rows, bars, categories) */
} barplot;

/* The index of name among the rows ('r'), row's bars ('b') or the categories ('k'), added when
 * new; -1 when a limit is reached (counted in dropped). */
int bp_index(barplot *p, int which, const char *name, int row);
/* Adds v to the stack of category cat of bar b of panel (row, col); ignored for an index < 0. */
void bp_add(barplot *p, int row, int col, int b, int cat, double v);
/* The script drawing p with gnuplot's terminal term to outfile, as rp_write. 0, or -1. */
int bp_write(const barplot *p, FILE *f, const char *term, const char *outfile,
             void (*str)(FILE *, const char *));

#endif

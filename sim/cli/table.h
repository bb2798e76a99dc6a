/* table.h — a table of text cells for the command line: printed aligned and fitted to a
 * width (columns give way by priority, labels wrap), as CSV, or for a paper (Markdown, LaTeX
 * with booktabs). */
#ifndef MPCSIM_TABLE_H
#define MPCSIM_TABLE_H

#include <stdio.h>

#define REP_MAX_COLS 128

typedef enum rep_format { RF_TEXT, RF_CSV, RF_JSON, RF_MARKDOWN, RF_LATEX } rep_format;

typedef struct col {
    const char *head;
    int prio;  /* 1 most important: columns with the largest prio go first when space lacks */
    int right; /* numbers right-aligned */
    int shown;
} col;

typedef struct table {
    col c[REP_MAX_COLS];
    size_t cols, rows; /* rows without the header */
    char **cell;       /* rows × cols, row-major */
    size_t n, cap;
    int oom;
} table;

/* A column: its heading, its priority (1 most important: the largest give way first when
 * the width lacks), numbers right-aligned. */
void tab_col(table *t, const char *head, int prio, int right);
/* The next cell, row by row (a copy; out of memory sticks in t->oom). */
void tab_add(table *t, const char *s);
/* The cell at row r (0 = first row after the header), column c. */
const char *tab_get(const table *t, size_t r, size_t c);
void tab_free(table *t);
/* Every column as CSV (RFC 4180 quoting). */
void tab_csv(const table *t, FILE *f);
/* Rows r0..r1 aligned and fitted to width; the first `shared` columns that every row shares
 * are printed once above the table. */
void tab_print(table *t, int width, size_t shared, size_t r0, size_t r1, FILE *f);
/* Rows r0..r1 as a Markdown table or a LaTeX booktabs tabular (fmt). */
void tab_paper(table *t, rep_format fmt, size_t shared, size_t r0, size_t r1, FILE *f);

#endif

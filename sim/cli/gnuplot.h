/* gnuplot.h — the one way the commands run gnuplot (plot, serve --plot): a child process, no
 * shell, with its variables set as escaped gnuplot strings. */
#ifndef MPCSIM_GNUPLOT_H
#define MPCSIM_GNUPLOT_H

#include <stdio.h>

/* Runs gnuplot: with expr (NULL: none) as -e, then the files in order (at most 6); its stderr to
 * errlog (NULL: this process's stderr). 0 if it exited 0, else its exit status (127: gnuplot
 * missing) or -1. */
int gnuplot_run(const char *expr, const char *const *files, int n, const char *errlog);
/* Writes s as a gnuplot double-quoted string literal that gnuplot reads back as s: quotes,
 * backslashes and backquotes (which gnuplot would run as a shell command) escaped, a line
 * break as \n. */
void gnuplot_str(FILE *f, const char *s);
/* One line of a variable file: name = "value", quoted as by gnuplot_str. */
void gnuplot_var_line(FILE *f, const char *name, const char *value);
/* "name = \"value\"; " appended to buf (size n), quoted as by gnuplot_str: -e expressions.
 * Appends nothing and returns -1 when it does not fit. */
int gnuplot_var(char *buf, size_t n, const char *name, const char *value);

#endif

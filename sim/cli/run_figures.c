/* run_figures.c — the figures a scenario declares (`figures:`, sim/scenario/scn_figures.c),
 * drawn by `mpcsim plot` once the sweep has finished. */
#include "run_figures.h"

#include <stdio.h>
#include <string.h>

#include "cmd.h"

/* One figure: `mpcsim plot DB -o DIR ...` over every finished run of the database (a run two
 * scenarios share is recorded once, under the first one's name). */
static int draw(const scn_figure *f, const char *db, const char *dir)
{
    char stem[sizeof f->name];
    const char *argv[32];
    int n = 0;
    argv[n++] = "plot";
    argv[n++] = db;
    argv[n++] = "-o";
    argv[n++] = dir;
    int bd = !strcmp(f->figure, "breakdown");
    if (f->figure[0])
        argv[n++] = "--figure", argv[n++] = f->figure;
    if (f->y[0])
        argv[n++] = "--y", argv[n++] = f->y;
    if (f->x[0])
        argv[n++] = "--x", argv[n++] = f->x;
    if (f->row[0]) /* the breakdown's panels are its rows */
        argv[n++] = bd ? "--by" : "--row", argv[n++] = f->row;
    if (f->col[0])
        argv[n++] = "--col", argv[n++] = f->col;
    if (f->metric[0])
        argv[n++] = "--metric", argv[n++] = f->metric;
    if (f->name[0]) { /* NAME.EXT: --name NAME --format EXT */
        const char *dot = strrchr(f->name, '.');
        snprintf(stem, sizeof stem, "%.*s", (int)(dot - f->name), f->name);
        argv[n++] = "--name";
        argv[n++] = stem;
        argv[n++] = "--format";
        argv[n++] = dot + 1;
    }
    argv[n] = NULL;
    fflush(stdout);
    return cmd_plot(n, (char **)argv);
}

int run_figures(const scenario *s, size_t n, const char *db)
{
    size_t len = strlen(db);
    char dir[1100];
    int strip = len > 3 && !strcmp(db + len - 3, ".db");
    snprintf(dir, sizeof dir, "%.*s-plots", (int)(strip ? len - 3 : len), db);
    int st = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < s[i].n_figures; k++) {
            int rc = draw(&s[i].figures[k], db, dir);
            if (rc && !st) {
                fprintf(stderr,
                        "mpcsim run: error: figure %zu of %s not drawn; the runs are recorded "
                        "(mpcsim plot %s draws it again)\n",
                        k + 1, s[i].path, db);
                st = 1; /* the sweep itself succeeded: 1 whatever plot's reason (2: usage) */
            }
        }
    return st;
}

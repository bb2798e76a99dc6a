/* barplot.c — a faceted figure of horizontal stacked bars as a gnuplot script (see barplot.h). */
#include "barplot.h"

#include <math.h>
#include <string.h>

#include "figure.h"

/* Okabe and Ito's colours, then Paul Tol's muted ones: 16 categories apart. */
static const char *const palette[] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
    "#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#882255", "#AA4499"};
#define N_COLOURS (int)(sizeof palette / sizeof palette[0])

/* The layout in pixels: a panel's width and margins, a bar's height, the heading. */
enum { CELL_W = 420, M_LEFT = 12, M_RIGHT = 24, M_TOP = 40, M_BOTTOM = 56, BAR_H = 24 };
enum { HEAD_H = 56, KEY_ROW_H = 20, KEY_PAD = 30, LABEL_MAX = 60 };

int bp_index(barplot *p, int which, const char *name, int row)
{
    char(*names)[RP_NAME] = NULL, (*cats)[32] = NULL;
    int *n, max;
    if (which == 'r')
        names = p->row_name, n = &p->nrow, max = BP_MAX_ROWS;
    else if (which == 'b') {
        if (row < 0)
            return -1;
        names = p->bar[row], n = &p->nbar[row], max = BP_MAX_BARS;
    } else
        cats = p->cat, n = &p->ncat, max = BP_MAX_CATS;
    for (int i = 0; i < *n; i++)
        if (!strcmp(names ? names[i] : cats[i], name))
            return i;
    if (*n == max) {
        p->dropped++;
        return -1;
    }
    if (names)
        snprintf(names[*n], RP_NAME, "%s", name);
    else {
        snprintf(cats[*n], sizeof cats[0], "%s", name);
        p->cat_colour[*n] = *n;
    }
    return (*n)++;
}

void bp_add(barplot *p, int row, int col, int b, int cat, double v)
{
    if (row < 0 || col < 0 || b < 0 || cat < 0 || row >= BP_MAX_ROWS || col >= BP_MAX_COLS ||
        !isfinite(v))
        return;
    p->v[row][col][b][cat] += v;
}

/* A category that has a value somewhere: only those are drawn and in the legend. */
static int cat_used(const barplot *p, int k)
{
    for (int r = 0; r < p->nrow; r++)
        for (int c = 0; c < p->ncol; c++)
            for (int b = 0; b < p->nbar[r]; b++)
                if (p->v[r][c][b][k] != 0)
                    return 1;
    return 0;
}

static const char *colour(const barplot *p, int k)
{
    return palette[(p->cat_colour[k] % N_COLOURS + N_COLOURS) % N_COLOURS];
}

int bp_write(const barplot *p, FILE *f, const char *term, const char *outfile,
             void (*str)(FILE *, const char *))
{
    int nrow = p->nrow > 0 ? p->nrow : 1, ncol = p->ncol > 0 ? p->ncol : 1, maxbars = 1;
    size_t longest = 4, catlen = 4;
    for (int r = 0; r < p->nrow; r++) {
        maxbars = p->nbar[r] > maxbars ? p->nbar[r] : maxbars;
        for (int b = 0; b < p->nbar[r]; b++)
            longest = strlen(p->bar[r][b]) > longest ? strlen(p->bar[r][b]) : longest;
    }
    if (longest > LABEL_MAX)
        longest = LABEL_MAX;
    int nused = 0;
    for (int k = 0; k < p->ncat; k++)
        if (cat_used(p, k)) {
            nused++;
            catlen = strlen(p->cat[k]) > catlen ? strlen(p->cat[k]) : catlen;
        }
    /* the bar labels' room left of the first column (about 6.2 pixels a character at ',9') */
    int LW = 24 + (int)(6.2 * (double)longest), CELL_H = M_TOP + M_BOTTOM + maxbars * BAR_H;
    if (CELL_H < 200)
        CELL_H = 200;
    int W = LW + ncol * CELL_W, entry = 44 + (int)(6.4 * (double)catlen);
    int tw = (int)(11.5 * (double)strlen(p->title)) + 40,
        sw = (int)(7.0 * (double)strlen(p->subtitle)) + 40, x0 = 0;
    int wide = tw > sw ? tw : sw;
    if (W < wide) {
        x0 = (wide - W) / 2;
        W = wide;
    }
    int kcols = (W - 40) / entry > 0 ? (W - 40) / entry : 1;
    if (kcols > nused && nused > 0)
        kcols = nused;
    int krows = nused > 0 ? (nused + kcols - 1) / kcols : 0;
    int H = HEAD_H + nrow * CELL_H + (krows ? KEY_PAD + krows * KEY_ROW_H : 0);
    if (!strcmp(term, "pdfcairo"))
        fprintf(f, "set terminal pdfcairo size %.2fin,%.2fin font 'Sans,8'\n", W / 100.0,
                H / 100.0);
    else
        fprintf(f, "set terminal %s size %d,%d%s font 'Sans,10'\n", term, W, H,
                strcmp(term, "svg") ? " noenhanced" : " noenhanced background '#ffffff'");
    fputs("set encoding utf8\nset output ", f);
    str(f, outfile);
    fputs("\nset termoption noenhanced\nset multiplot\nset grid xtics noytics lc rgb '#dddddd'\n"
          "set border lc rgb '#444444'\nset key off\nset tics nomirror out scale 0.6\n"
          "set style fill solid 0.85 border rgb '#333333'\n",
          f);
    fputs("set label 901 ", f);
    str(f, p->title);
    fprintf(f, " at screen 0.5, %.5f center font ',13'\n", 1 - 20.0 / H);
    fputs("set label 902 ", f);
    str(f, p->subtitle);
    fprintf(f, " at screen 0.5, %.5f center font ',9' tc rgb '#555555'\n", 1 - 40.0 / H);

    for (int r = 0; r < nrow; r++)
        for (int c = 0; c < ncol; c++) {
            int nb = p->nrow > 0 ? p->nbar[r] : 0;
            double max = 0;
            for (int b = 0; b < nb; b++) {
                double sum = 0;
                for (int k = 0; k < p->ncat; k++)
                    sum += p->v[r][c][b][k];
                max = fmax(max, sum);
            }
            fig_unit u = fig_unit_pick(p->ax[c].kind, max);
            fprintf(f, "\n# panel %d, %d\n", r + 1, c + 1);
            int drawn = 0;
            for (int k = 0; k < p->ncat; k++) { /* one block per category: bar, start, end */
                if (!cat_used(p, k))
                    continue;
                fprintf(f, "$b%d_%d_%d << EOD\n", r, c, k);
                for (int b = 0; b < nb; b++) {
                    double start = 0;
                    for (int j = 0; j < k; j++)
                        start += p->v[r][c][b][j];
                    fprintf(f, "%d %.9g %.9g\n", b, start / u.div,
                            (start + p->v[r][c][b][k]) / u.div);
                }
                fputs("EOD\n", f);
                drawn++;
            }
            double L = (double)(x0 + LW + c * CELL_W + M_LEFT) / W,
                   R = (double)(x0 + LW + (c + 1) * CELL_W - M_RIGHT) / W;
            double T = 1 - (double)(HEAD_H + r * CELL_H + M_TOP) / H;
            double B = 1 - (double)(HEAD_H + (r + 1) * CELL_H - M_BOTTOM) / H;
            fprintf(f,
                    "set lmargin at screen %.5f\nset rmargin at screen %.5f\n"
                    "set tmargin at screen %.5f\nset bmargin at screen %.5f\n",
                    L, R, T, B);
            if (c == 0 && p->nrow > 0) { /* the row's name, centred over its panels */
                fputs("set label 904 ", f);
                str(f, p->row_name[r]);
                fprintf(f, " at screen %.5f, %.5f center font ',10'\n",
                        (double)(x0 + LW + ncol * CELL_W / 2) / W,
                        1 - (double)(HEAD_H + r * CELL_H + 16) / H);
            }
            char xl[200];
            snprintf(xl, sizeof xl, "%s%s%s%s", p->ax[c].label, u.name[0] ? " (" : "", u.name,
                     u.name[0] ? ")" : "");
            fputs("unset title\nset xlabel ", f);
            str(f, xl);
            /* the first bar on top */
            fprintf(f, "\nset xrange [0:*]\nset yrange [%g:-0.6]\n", nb > 0 ? nb - 0.4 : 0.4);
            if (c == 0 && nb > 0) { /* the bars' labels, left of the first column only */
                fputs("set ytics (", f);
                for (int b = 0; b < nb; b++) {
                    char lab[LABEL_MAX + 4], esc[2 * LABEL_MAX + 8];
                    snprintf(lab, sizeof lab, "%s", p->bar[r][b]);
                    if (strlen(p->bar[r][b]) > LABEL_MAX)
                        memcpy(lab + LABEL_MAX - 3, "...", 4);
                    /* a tic label is a format: "h2o@10%" is written "h2o@10%%" */
                    size_t k = 0;
                    for (const char *q = lab; *q; q++) {
                        if (*q == '%')
                            esc[k++] = '%';
                        esc[k++] = *q;
                    }
                    esc[k] = '\0';
                    fputs(b ? ", " : "", f);
                    str(f, esc);
                    fprintf(f, " %d", b);
                }
                fputs(") nomirror font ',9'\n", f);
            } else
                fputs("unset ytics\n", f);
            if (!drawn) {
                fputs("set xrange [0:1]\n"
                      "set label 903 'no runs here' at graph 0.5, 0.5 center tc rgb '#777777'\n"
                      "plot NaN notitle\nunset label 903\n",
                      f);
            } else {
                fputs("plot ", f);
                int n = 0;
                for (int k = 0; k < p->ncat; k++)
                    if (cat_used(p, k))
                        fprintf(f,
                                "%s$b%d_%d_%d using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.36) "
                                "with boxxyerror fc rgb '%s' notitle",
                                n++ ? ", \\\n     " : "", r, c, k, colour(p, k));
                fputc('\n', f);
            }
            if (r == 0 && c == 0)
                fputs("unset label 901\nunset label 902\n", f);
            if (c == 0)
                fputs("unset label 904\n", f);
        }
    if (krows) { /* the legend: one entry per category, under the grid */
        double T = 1 - (double)(HEAD_H + nrow * CELL_H + 8) / H;
        fprintf(f,
                "\n# legend\nunset title\nunset xlabel\nunset ylabel\nunset tics\nunset border\n"
                "unset grid\nset xrange [0:1]\nset yrange [0:1]\n"
                "set lmargin at screen 0.01\nset rmargin at screen 0.99\n"
                "set tmargin at screen %.5f\nset bmargin at screen 0\n"
                "set key at screen 0.5, %.5f center top horizontal maxcols %d maxrows %d "
                "Left reverse samplen 1.5 width 2 spacing 1.15 font ',9'\nplot ",
                T, T, kcols, krows);
        int n = 0;
        for (int k = 0; k < p->ncat; k++)
            if (cat_used(p, k)) {
                fprintf(f, "%sNaN with boxes fc rgb '%s' title ", n++ ? ", \\\n     " : "",
                        colour(p, k));
                str(f, p->cat[k]);
            }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    return ferror(f) ? -1 : 0;
}

/* check_figure.c — the figure model (sim/figure): axis units picked from the largest value;
 * the faceted figure (relplot.h): its Pareto front against a brute-force one, and the script it
 * writes (a colour per family, a marker per configuration within it, log and zero-based axes,
 * fixed panel sizes, a panel without points not drawn, an x axis per column); the stacked bars
 * (barplot.h): stacks that add up, one legend of the categories that have values, the labels
 * once per row. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/figure/barplot.h"
#include "sim/figure/figure.h"
#include "sim/figure/relplot.h"

START_TEST(test_unit_pick)
{
    ck_assert_str_eq(fig_unit_pick('s', 5e-4).name, "us");
    ck_assert_str_eq(fig_unit_pick('s', 0.5).name, "ms");
    ck_assert_str_eq(fig_unit_pick('s', 119).name, "s");
    ck_assert_str_eq(fig_unit_pick('s', 120).name, "min");
    ck_assert_str_eq(fig_unit_pick('s', 7200).name, "h");
    ck_assert_str_eq(fig_unit_pick('s', 172800).name, "d");
    ck_assert_str_eq(fig_unit_pick('B', 999).name, "B");
    ck_assert_str_eq(fig_unit_pick('B', 1e3).name, "kB");
    ck_assert_double_eq(fig_unit_pick('B', 3e9).div, 1e9);
    ck_assert_str_eq(fig_unit_pick('B', 5e15).name, "TB");
    ck_assert_str_eq(fig_unit_pick(0, 5e15).name, "");
    ck_assert_double_eq(fig_unit_pick(0, 5e15).div, 1);
}
END_TEST

/* The front by brute force: the points no other point beats (x no larger, y no worse, one of
 * them strictly). */
static int beaten(const double *x, const double *y, int n, int dir, int i)
{
    for (int j = 0; j < n; j++)
        if (j != i && x[j] <= x[i] && dir * y[j] >= dir * y[i] &&
            (x[j] < x[i] || dir * y[j] > dir * y[i]))
            return 1;
    return 0;
}

START_TEST(test_pareto_front)
{
    double x[64], y[64];
    int front[64];
    unsigned seed = 7;
    for (int dir = -1; dir <= 1; dir += 2)
        for (int trial = 0; trial < 50; trial++) {
            int n = 1 + trial % 40;
            for (int i = 0; i < n; i++) { /* coarse values: ties happen */
                seed = seed * 1103515245u + 12345u;
                x[i] = (double)(seed >> 16 & 15);
                seed = seed * 1103515245u + 12345u;
                y[i] = (double)(seed >> 16 & 15);
            }
            int k = rp_front(x, y, n, dir, front), want = 0;
            for (int i = 0; i < n; i++)
                want += !beaten(x, y, n, dir, i);
            /* duplicates of a front point count once in rp_front */
            for (int i = 0; i < n; i++)
                for (int j = 0; j < i; j++)
                    if (x[i] == x[j] && y[i] == y[j] && !beaten(x, y, n, dir, i)) {
                        want--;
                        break;
                    }
            ck_assert_int_eq(k, want);
            for (int i = 0; i < k; i++) {
                ck_assert(!beaten(x, y, n, dir, front[i]));
                if (i)
                    ck_assert_double_gt(x[front[i]], x[front[i - 1]]);
            }
        }
}
END_TEST

static void gp_str(FILE *f, const char *s) { fprintf(f, "\"%s\"", s); }

/* The legend line of entry `title` in script: its colour and marker. */
static void legend_entry(const char *script, const char *title, char *colour, int *pt)
{
    char want[96];
    snprintf(want, sizeof want, "title \"%s\"", title);
    const char *t = strstr(script, want);
    ck_assert_msg(t != NULL, "no legend entry %s", title);
    const char *l = t;
    while (l > script && l[-1] != '\n')
        l--;
    const char *c = strstr(l, "lc rgb '");
    ck_assert(c && c < t);
    snprintf(colour, 8, "%.7s", c + 8);
    const char *p = strstr(l, " pt ");
    ck_assert(p && p < t);
    *pt = atoi(p + 4);
}

START_TEST(test_relplot_script)
{
    static relplot P;
    memset(&P, 0, sizeof P);
    snprintf(P.x.label, sizeof P.x.label, "kept fraction");
    P.x.log = -1;
    P.y[0] = (rp_axis){.label = "bytes", .kind = 'B', .log = -1, .zero = 1};
    static const char *const fam[] = {"full", "h2o", "snapkv"};
    int c0 = rp_index(&P, 'c', "lan", 0), c1 = rp_index(&P, 'c', "wan", 0);
    rp_index(&P, 'c', "empty", 0); /* a panel nothing lands in */
    for (int f = 0; f < 3; f++) {
        int h = rp_index(&P, 'h', fam[f], 0);
        for (int b = 0; b < (f ? 3 : 1); b++) {
            char name[32];
            snprintf(name, sizeof name, "%s%d", fam[f], b);
            int s = rp_index(&P, 's', name, h);
            double kept = f ? 0.1 * (b + 1) : 1, apart = f == 2 ? 1.5 : 1;          /* no overlap */
            ck_assert_int_eq(rp_add(&P, 0, c0, h, s, kept, 2e6 * kept * apart), 0); /* to 2 MB */
            ck_assert_int_eq(rp_add(&P, 0, c1, h, s, kept, 2e9 * kept * kept * kept * apart),
                             0); /* wide span */
        }
    }
    ck_assert_int_eq(rp_index(&P, 's', "h2o0", 1), 1); /* found again, not added */
    ck_assert_int_eq(P.nstyle, 7);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(rp_write(&P, f, "pngcairo", "out.png", gp_str), 0);
    fclose(f);
    /* two panels of fixed size side by side (the empty one not drawn), seven legend entries in
     * one row or more */
    int W, H;
    const char *t = strstr(buf, "size ");
    ck_assert(t && sscanf(t, "size %d,%d", &W, &H) == 2);
    ck_assert_int_eq(W, 2 * 440);
    /* a colour per family, a marker per configuration within one */
    char col[7][8];
    int pt[7];
    for (int s = 0; s < 7; s++)
        legend_entry(buf, P.style_name[s], col[s], &pt[s]);
    for (int s = 0; s < 7; s++)
        for (int u = 0; u < s; u++) {
            int same_family = P.style_hue[s] == P.style_hue[u];
            ck_assert_int_eq(!strcmp(col[s], col[u]), same_family);
            if (same_family)
                ck_assert_int_ne(pt[s], pt[u]);
        }
    /* lan spans a decade: linear from 0 in MB; wan spans four: log, in GB */
    const char *lan = strstr(buf, "# panel 1, 1"), *wan = strstr(buf, "# panel 1, 2"),
               *empty = strstr(buf, "# legend");
    ck_assert(lan && wan && empty && lan < wan && wan < empty);
    ck_assert_ptr_null(strstr(buf, "# panel 1, 3"));
    const char *ylan = strstr(lan, "set ylabel"), *ywan = strstr(wan, "set ylabel");
    ck_assert(!strncmp(ylan, "set ylabel \"bytes (MB)\"", 23));
    ck_assert(!strncmp(ywan, "set ylabel \"bytes (GB), log\"", 28));
    ck_assert(strstr(lan, "set yrange [0:*]") < wan);
    ck_assert(strstr(wan, "set logscale y 10") < empty);
    ck_assert_ptr_null(strstr(buf, "no runs here"));
    free(buf);
}
END_TEST

/* Columns of different costs against one accuracy: each column's own x unit, each panel's
 * own range; a family at one x only is not joined by a vertical line. */
START_TEST(test_relplot_x_per_column)
{
    static relplot P;
    memset(&P, 0, sizeof P);
    P.x_per_col = 1;
    P.xc[0] = (rp_axis){.label = "latency", .kind = 's', .log = -1, .zero = 1};
    P.xc[1] = (rp_axis){.label = "bytes", .kind = 'B', .log = -1, .zero = 1};
    P.y[0] = (rp_axis){.label = "recall", .log = -1};
    rp_index(&P, 'c', "latency", 0);
    rp_index(&P, 'c', "bytes", 0);
    int h = rp_index(&P, 'h', "h2o", 0), g = rp_index(&P, 'h', "full", 0);
    int s0 = rp_index(&P, 's', "h2o a", h), s1 = rp_index(&P, 's', "h2o b", h);
    int s2 = rp_index(&P, 's', "full", g);
    rp_add(&P, 0, 0, h, s0, 0.002, 0.8); /* 2 and 3 ms */
    rp_add(&P, 0, 0, h, s1, 0.003, 0.9);
    rp_add(&P, 0, 0, g, s2, 0.004, 1.0);
    rp_add(&P, 0, 1, h, s0, 5e9, 0.8); /* 5 GB, and h2o b at the same bytes */
    rp_add(&P, 0, 1, h, s1, 5e9, 0.9);
    rp_add(&P, 0, 1, g, s2, 7e9, 1.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(rp_write(&P, f, "pngcairo", "out.png", gp_str), 0);
    fclose(f);
    const char *c0 = strstr(buf, "# panel 1, 1"), *c1 = strstr(buf, "# panel 1, 2");
    ck_assert(c0 && c1 && c0 < c1);
    ck_assert(strstr(c0, "set xlabel \"latency (ms)\"") < c1);
    ck_assert_ptr_nonnull(strstr(c1, "set xlabel \"bytes (GB)\""));
    ck_assert_ptr_nonnull(strstr(c0, "$h0_0_0 << EOD\n2 0.8\n3 0.9\nEOD"));
    /* h2o's line is drawn in the latency panel, not in the bytes one (both at 5 GB) */
    const char *p0 = strstr(c0, "\nplot "), *p1 = strstr(c1, "\nplot ");
    ck_assert(p0 && p1);
    ck_assert(strstr(p0, "$h0_0_0 using 1:2 with lines") < c1);
    ck_assert_ptr_null(strstr(p1, "$h0_1_0 using 1:2 with lines"));
    free(buf);
}
END_TEST

/* The k-th number (1-based) on the line after needle in s. */
static double after(const char *s, const char *needle, int k)
{
    const char *p = strstr(s, needle);
    ck_assert_msg(p != NULL, "no %s", needle);
    p = strchr(p, '\n') + 1;
    double v = NAN;
    for (int i = 0; i < k; i++)
        v = strtod(p, (char **)&p);
    return v;
}

START_TEST(test_barplot_script)
{
    static barplot B;
    memset(&B, 0, sizeof B);
    B.ncol = 2;
    B.ax[0] = (rp_axis){.label = "time", .kind = 's', .zero = 1};
    B.ax[1] = (rp_axis){.label = "online bytes", .kind = 'B', .zero = 1};
    int r0 = bp_index(&B, 'r', "lan", 0), r1 = bp_index(&B, 'r', "wan", 0);
    int att = bp_index(&B, 'k', "attention", 0), ffn = bp_index(&B, 'k', "ffn", 0);
    int none = bp_index(&B, 'k', "norm", 0); /* zero everywhere: left out */
    B.cat_colour[ffn] = 5;
    for (int r = r0; r <= r1; r++) {
        int full = bp_index(&B, 'b', "full", r), h2o = bp_index(&B, 'b', "h2o", r);
        bp_add(&B, r, 0, full, att, 0.2 * (r + 1));
        bp_add(&B, r, 0, full, ffn, 0.1);
        bp_add(&B, r, 0, h2o, att, 0.05);
        bp_add(&B, r, 0, h2o, none, 0);
        bp_add(&B, r, 1, full, att, 3e6);
        bp_add(&B, r, 1, full, att, 1e6); /* adds up */
        bp_add(&B, r, 1, h2o, ffn, 2e6);
    }
    ck_assert_int_eq(bp_index(&B, 'b', "h2o", r0), 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(bp_write(&B, f, "pngcairo", "out.png", gp_str), 0);
    fclose(f);
    /* stacks: ffn starts where attention ends, in the panel's unit (ms; s past 1 s) */
    ck_assert_double_eq_tol(after(buf, "$b0_0_1 <<", 2), 200, 1e-9);
    ck_assert_double_eq_tol(after(buf, "$b0_0_1 <<", 3), 300, 1e-9);
    ck_assert_double_eq_tol(after(buf, "$b0_1_0 <<", 3), 4, 1e-9); /* MB */
    ck_assert_ptr_nonnull(strstr(buf, "set xlabel \"time (ms)\""));
    ck_assert_ptr_nonnull(strstr(buf, "set xlabel \"online bytes (MB)\""));
    ck_assert_ptr_null(strstr(buf, "$b0_0_2 <<")); /* norm: no values */
    /* one legend: the categories with values, ffn in its own colour */
    const char *key = strstr(buf, "# legend");
    ck_assert_ptr_nonnull(key);
    ck_assert_int_eq(th_count(key, "NaN with boxes"), 2);
    ck_assert_ptr_nonnull(strstr(key, "fc rgb '#56B4E9' title \"ffn\""));
    ck_assert_ptr_null(strstr(key, "\"norm\""));
    /* the bars' labels once per row, left of the first column */
    ck_assert_int_eq(th_count(buf, "set ytics (\"full\" 0, \"h2o\" 1)"), 2);
    ck_assert_int_eq(th_count(buf, "unset ytics"), 2); /* the second columns */
    free(buf);
}
END_TEST

Suite *figure_suite(void)
{
    Suite *s = suite_create("figure");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_unit_pick, test_pareto_front, test_relplot_script, test_relplot_x_per_column,
             test_barplot_script);
    return s;
}

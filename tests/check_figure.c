/* check_figure.c — the figure model (sim/figure): axis units picked from the largest value,
 * the shared log x axis and each cell's padded range, and stacked-bar cells aligned on the
 * first cell's categories with all-zero categories dropped; the faceted figure (relplot.h): its
 * Pareto front against a brute-force one, and the script it writes (a colour per family, a
 * marker per configuration within it, log and zero-based axes, fixed panel sizes, a panel
 * without points said so). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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

START_TEST(test_x_axis)
{
    fig_cell c[3] = {{.nb = 1, .xmin = 128, .xmax = 256},
                     {.nb = 0, .xmin = 1e-9, .xmax = 1e9}, /* empty: not counted */
                     {.nb = 2, .xmin = 256, .xmax = 512}};
    ck_assert_int_eq(fig_xlog(c, 3, 0), 2);
    ck_assert_int_eq(fig_xlog(c, 3, 1), 10);
    ck_assert_int_eq(fig_xlog(c, 1, 0), 0); /* a span of 2 stays linear */
    double a, b;
    fig_cell_xrange(&c[0], 0, &a, &b);
    ck_assert_double_eq_tol(a, 128 - 6.4, 1e-12);
    ck_assert_double_eq_tol(b, 256 + 6.4, 1e-12);
    fig_cell_xrange(&c[0], 2, &a, &b);
    ck_assert_double_eq_tol(a, 128 / 1.25, 1e-12);
    ck_assert_double_eq_tol(b, 256 * 1.25, 1e-12);
    fig_cell_xrange(&c[1], 0, &a, &b); /* empty: around 1 */
    ck_assert_double_eq(a, 0.5);
    ck_assert_double_eq(b, 1.5);
    fig_cell one = {.nb = 1, .xmin = 0, .xmax = 0};
    fig_cell_xrange(&one, 0, &a, &b);
    ck_assert_double_eq(a, -1);
    ck_assert_double_eq(b, 1);
    one.xmin = one.xmax = 8;
    fig_cell_xrange(&one, 2, &a, &b);
    ck_assert_double_eq(a, 4);
    ck_assert_double_eq(b, 16);
}
END_TEST

static void put(fig_bars *b, const char *label, const char *cat, double v)
{
    int l = fig_name_index(&b->label[0][0], sizeof b->label[0], &b->nl, FIG_MAX_SERIES, label);
    int k = fig_name_index(&b->cat[0][0], sizeof b->cat[0], &b->nc, FIG_MAX_CATS, cat);
    b->v[l][k] = v;
}

START_TEST(test_bars_align)
{
    static fig_bars a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    put(&a, "full", "attention", 2);
    put(&a, "full", "ffn", 0);
    put(&a, "full", "softmax", 1);
    put(&b, "full", "softmax", 3);
    put(&b, "full", "attention", 4);
    put(&b, "full", "norm", 5); /* not among a's categories: dropped */
    ck_assert_int_eq(fig_name_index(&a.cat[0][0], sizeof a.cat[0], &a.nc, 3, "norm"), -1);
    fig_bars_align(&a, &b);
    ck_assert_int_eq(a.nc, 2); /* ffn is zero in both */
    ck_assert_int_eq(b.nc, 2);
    ck_assert_str_eq(b.cat[0], "attention");
    ck_assert_str_eq(b.cat[1], "softmax");
    ck_assert_double_eq(b.v[0][0], 4);
    ck_assert_double_eq(b.v[0][1], 3);
    ck_assert_double_eq(a.v[0][1], 1);
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
            double kept = f ? 0.1 * (b + 1) : 1;
            ck_assert_int_eq(rp_add(&P, 0, c0, h, s, kept, 2e6 * kept), 0); /* 0.2 .. 2 MB */
            ck_assert_int_eq(rp_add(&P, 0, c1, h, s, kept, 2e9 * kept * kept * kept),
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
    /* three panels of fixed size side by side, seven legend entries in one row or more */
    int W, H;
    const char *t = strstr(buf, "size ");
    ck_assert(t && sscanf(t, "size %d,%d", &W, &H) == 2);
    ck_assert_int_eq(W, 3 * 440);
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
               *empty = strstr(buf, "# panel 1, 3");
    ck_assert(lan && wan && empty && lan < wan && wan < empty);
    const char *ylan = strstr(lan, "set ylabel"), *ywan = strstr(wan, "set ylabel");
    ck_assert(!strncmp(ylan, "set ylabel \"bytes (MB)\"", 23));
    ck_assert(!strncmp(ywan, "set ylabel \"bytes (GB), log\"", 28));
    ck_assert(strstr(lan, "set yrange [0:*]") < wan);
    ck_assert(strstr(wan, "set logscale y 10") < empty);
    ck_assert_ptr_nonnull(strstr(empty, "no runs here"));
    free(buf);
}
END_TEST

Suite *figure_suite(void)
{
    Suite *s = suite_create("figure");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_unit_pick, test_x_axis, test_bars_align, test_pareto_front,
             test_relplot_script);
    return s;
}

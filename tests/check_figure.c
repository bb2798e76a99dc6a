/* check_figure.c — the figure model (sim/figure): axis units picked from the largest value,
 * the shared log x axis and each cell's padded range, and stacked-bar cells aligned on the
 * first cell's categories with all-zero categories dropped. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "sim/figure/figure.h"

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

Suite *figure_suite(void)
{
    Suite *s = suite_create("figure");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_unit_pick, test_x_axis, test_bars_align);
    return s;
}

# lines.gp — line panels: value against the x axis, one line per series. A grid of nrows ×
# ncols cells (row-major, cell i = 1..ncells): filei (one block per series, headed by its
# name: x, y already in the unit of ylabeli), titlei, ylabeli, nbi (blocks), ylogi, xmini,
# xmaxi, lti_b (the colour of block b); xlog (0, 2 or 10), xlabel_text, heading, subtitle. Defined by
# `mpcsim plot` (sim/cli/cmd_plot.c) before this script runs.
width = (ncols > 1 ? 620 : 820) * ncols
height = 360 * nrows + 60
load scriptdir."/plot_common.gp"
set multiplot layout nrows, ncols title heading."\n".subtitle noenhanced
if (xlog > 0) { eval sprintf("set logscale x %d", xlog) }
set xlabel xlabel_text offset 0, 0.4
set key below horizontal maxcols 2 samplen 2 spacing 1 font ",9" noenhanced
set format y "%g"
do for [i = 1:ncells] {
    set title value(sprintf("title%d", i)) noenhanced
    set ylabel value(sprintf("ylabel%d", i)) noenhanced
    eval sprintf("set xrange [%.9g:%.9g]", value(sprintf("xmin%d", i)), value(sprintf("xmax%d", i)))
    if (value(sprintf("ylog%d", i))) { set logscale y } else { unset logscale y; set yrange [0:*] }
    n = value(sprintf("nb%d", i))
    f = value(sprintf("file%d", i))
    if (n > 0) {
        plot for [b = 0:n - 1] f index b using 1:2 with linespoints lt value(sprintf("lt%d_%d", i, b)) title columnheader(1)
    } else {
        unset key
        set label 1 "no runs with this figure" at graph 0.5, 0.5 center
        plot NaN notitle
        unset label 1
        set key
    }
}
unset multiplot

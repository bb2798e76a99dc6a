# pareto.gp — accuracy against cost: one marker per policy configuration (series) and the
# Pareto front (no other configuration both cheaper and more accurate); a row per panel, the
# cost on the left the decode latency per token (or the whole run's), on the right the online
# bytes. Cells as lines.gp (filei: blocks per series of cost, accuracy; titlei, nbi, lti_b),
# front files datadir/front_<p>_<k>.dat, xlabeli (the cost and its unit), xlogci; metric_name,
# better ("higher" or "lower"), heading, subtitle.
width = 1240
height = 380 * nrows + 70
load scriptdir."/plot_common.gp"
set multiplot layout nrows, ncols title heading."\n".subtitle noenhanced
set ylabel metric_name noenhanced
set key below horizontal maxcols 3 samplen 1 font ",9" noenhanced
set format x "%g"
do for [i = 1:ncells] {
    set title value(sprintf("title%d", i)) noenhanced
    set xlabel value(sprintf("xlabel%d", i)) offset 0, 0.4
    if (value(sprintf("xlogci%d", i))) { set logscale x } else { unset logscale x }
    n = value(sprintf("nb%d", i))
    f = value(sprintf("file%d", i))
    fr = sprintf("%s/front_%d_%d.dat", datadir, (i - 1) / 2 + 1, (i - 1) % 2 + 1)
    set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05
    plot for [b = 0:n - 1] f index b using 1:2 with points lt value(sprintf("lt%d_%d", i, b)) pt 7 ps 1.6 title columnheader(1), \
         fr using 1:2 with steps lw 1.5 dt 2 lc rgb "#444444" title "Pareto front"
}
unset multiplot

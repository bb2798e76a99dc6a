# latency_vs_seq.gp — online latency (prefill + decode) against sequence length, one line per
# policy, one panel per network. Data: datadir/lat_<i>.dat, one block per series, each block
# headed by its title; npanels, panel<i> (network name), nb<i> (blocks), xlabel_text.
width = 780 * npanels
height = 460
load scriptdir."/plot_common.gp"
set multiplot layout 1, npanels title "Online latency vs sequence length"
set logscale x 2
set logscale y
set xlabel xlabel_text
set ylabel "latency (s)"
set key outside right top noenhanced
do for [i = 1:npanels] {
    set title value(sprintf("panel%d", i)) noenhanced
    f = sprintf("%s/lat_%d.dat", datadir, i)
    plot for [b = 0:value(sprintf("nb%d", i)) - 1] f index b using 1:2 with linespoints lw 2 pt 7 ps 0.8 title columnheader(1)
}
unset multiplot

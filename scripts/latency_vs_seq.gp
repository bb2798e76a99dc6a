# latency_vs_seq.gp — online latency against sequence length, one line per policy, one column
# per network: the top row the whole run (prefill + decode), the bottom row the decode latency
# per generated token. Data: datadir/lat_<i>.dat and datadir/dec_<i>.dat, one block per
# series, each block headed by its title; npanels, panel<i> (network name), nb<i> (blocks),
# xlabel_text.
width = 780 * npanels
height = 820
load scriptdir."/plot_common.gp"
set multiplot layout 2, npanels title "Online latency vs sequence length"
set logscale x 2
set logscale y
set xlabel xlabel_text
set key outside right top noenhanced
do for [i = 1:npanels] {
    set title value(sprintf("panel%d", i))." — whole run (prefill + decode)" noenhanced
    set ylabel "latency (s)"
    f = sprintf("%s/lat_%d.dat", datadir, i)
    plot for [b = 0:value(sprintf("nb%d", i)) - 1] f index b using 1:2 with linespoints lw 2 pt 7 ps 0.8 title columnheader(1)
}
do for [i = 1:npanels] {
    set title value(sprintf("panel%d", i))." — decode, per generated token" noenhanced
    set ylabel "latency per token (s)"
    f = sprintf("%s/dec_%d.dat", datadir, i)
    plot for [b = 0:value(sprintf("nb%d", i)) - 1] f index b using 1:2 with linespoints lw 2 pt 7 ps 0.8 title columnheader(1)
}
unset multiplot

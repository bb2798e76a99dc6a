# comm_vs_seq.gp — communication against sequence length, one line per policy: online bytes
# (all parties) and, when there is any, offline (dealer/preprocessing) bytes. Data:
# datadir/comm.dat, one block per series (x, online GB, offline GB); nb (blocks), has_offline,
# xlabel_text.
width = has_offline ? 1500 : 780
height = 460
load scriptdir."/plot_common.gp"
set multiplot layout 1, (has_offline ? 2 : 1) title "Communication vs sequence length"
set logscale x 2
set logscale y
set xlabel xlabel_text
set key outside right top noenhanced
f = datadir."/comm.dat"
set title "online (all parties)"
set ylabel "GB"
plot for [b = 0:nb - 1] f index b using 1:2 with linespoints lw 2 pt 7 ps 0.8 title columnheader(1)
if (has_offline) {
    set title "offline (preprocessing)"
    plot for [b = 0:nb - 1] f index b using 1:($3 > 0 ? $3 : NaN) with linespoints lw 2 pt 7 ps 0.8 title columnheader(1)
}
unset multiplot

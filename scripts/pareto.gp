# pareto.gp — accuracy against latency: one point per run, coloured by policy, and the Pareto
# front (no other run is both faster and more accurate). Data: datadir/pareto.dat (blocks per
# series: latency s, metric) and datadir/front.dat; nb, metric_name, better ("higher" or
# "lower"), net_name.
width = 860
height = 520
load scriptdir."/plot_common.gp"
set title sprintf("%s vs latency (%s; %s is better)", metric_name, net_name, better) noenhanced
set logscale x
set xlabel "latency (s)"
set ylabel metric_name noenhanced
set key outside right top noenhanced
plot for [b = 0:nb - 1] datadir."/pareto.dat" index b using 1:2 with points pt 7 ps 1.2 title columnheader(1), \
     datadir."/front.dat" using 1:2 with steps lw 2 dt 2 lc rgb "#444444" title "Pareto front"

# breakdown.gp — where the cost goes: stacked per-category bars, one bar per policy and network
# at the largest sequence length. Data: datadir/bd_time.dat (seconds of compute + network wait
# on the critical path) and datadir/bd_bytes.dat (online GB); first row: label then category
# names; ncols (columns, label included), seq_text (the sequence length shown).
width = 1200
height = 520
load scriptdir."/plot_common.gp"
set multiplot layout 1, 2 title "Per-category breakdown at ".seq_text
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -30 noenhanced
set key outside right top
set grid noxtics ytics
set title "time (compute + network wait)"
set ylabel "s"
plot for [c = 2:ncols] datadir."/bd_time.dat" using c:xtic(1) title columnheader(c)
set title "online bytes"
set ylabel "GB"
plot for [c = 2:ncols] datadir."/bd_bytes.dat" using c:xtic(1) title columnheader(c)
unset multiplot

# serve_load.gp — token hit rate and TTFT versus offered load, per KV sharing policy.
# Driven by `mpcsim serve SCENARIO.yaml --plot DIR`, which writes DIR/load.dat (one block per
# policy: rate_per_s token_hit request_hit ttft_p50_s ttft_p99_s tok_per_s) and calls:
#   gnuplot -e "dir='DIR'; titles='none prefix salted span'" scripts/serve_load.gp
if (!exists("dir")) dir = "."
if (!exists("titles")) titles = "none prefix salted span"
set terminal pngcairo size 1100,480 font "sans,11"
set output dir."/load.png"
n = words(titles)
set multiplot layout 1,2 title "Serving under load, per sharing policy"
set grid
set xlabel "offered load (requests per hour, log scale)"
set logscale x
set format x "%g"
set ylabel "token hit rate"
set yrange [0:1]
set key top left
plot for [i=1:n] dir."/load.dat" index (i-1) using ($1*3600):2 with linespoints lw 2 title word(titles, i)
set ylabel "TTFT (s, log scale): p50 solid, p99 dashed"
set logscale y
set autoscale y
plot for [i=1:n] dir."/load.dat" index (i-1) using ($1*3600):4 with linespoints lw 2 lc i title word(titles, i)." p50", \
     for [i=1:n] dir."/load.dat" index (i-1) using ($1*3600):5 with linespoints lw 1 dt 2 lc i notitle
unset multiplot

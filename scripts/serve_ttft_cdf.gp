# serve_ttft_cdf.gp — TTFT CDF per KV sharing policy, at a serving scenario's highest load.
# Driven by `mpcsim serve SCENARIO.yaml --plot DIR`, which writes DIR/ttft_cdf.dat (one block
# per policy: ttft_s cumulative_share) and calls:
#   gnuplot -e "dir='DIR'; titles='none prefix salted span'" scripts/serve_ttft_cdf.gp
if (!exists("dir")) dir = "."
if (!exists("titles")) titles = "none prefix salted span"
set terminal pngcairo size 900,560 font "sans,11"
set output dir."/ttft_cdf.png"
set title "Time to first token, CDF per sharing policy (highest load)"
set xlabel "TTFT (s, log scale)"
set ylabel "share of requests"
set logscale x
set yrange [0:1.02]
set grid
set key bottom right
n = words(titles)
plot for [i=1:n] dir."/ttft_cdf.dat" index (i-1) using 1:2 with steps lw 2 dt i title word(titles, i)

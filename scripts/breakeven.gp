# breakeven.gp — where a policy pays off: its decode-step speed-up over the full cache on a
# grid of link bandwidth × one-way latency, one panel per thread count, with the break-even
# contour (speed-up 1). `mpcsim breakeven` defines term_name, outfile, scriptdir, datafile
# (one block per thread count, scanlines per latency: bandwidth_mbps latency_ms log2(speed-up)
# speed-up), n_panels, panel_titles[i + 1], title_text and cb_max (the colour range ±cb_max in
# log2 of the speed-up).
width = 460 * n_panels + 80
height = 520
load scriptdir."/plot_common.gp"
unset grid
set view map
set pm3d map corners2color mean
set logscale x
set logscale y
set xlabel "bandwidth per link (Mbit/s)"
set ylabel "one-way latency (ms)"
set format x "%g"
set format y "%g"
set cbrange [-cb_max:cb_max]
set cblabel "speed-up over the full cache (×)"
set cbtics ("1/16" -4, "1/8" -3, "1/4" -2, "1/2" -1, "1" 0, "2" 1, "4" 2, "8" 3, "16" 4)
# red: the policy is slower than the full cache; blue: it wins; white: break-even
set palette defined (-1 "#b2182b", -0.5 "#ef8a62", -0.15 "#fddbc7", 0 "#f7f7f7", \
                     0.15 "#d1e5f0", 0.5 "#67a9cf", 1 "#2166ac")
set contour base
set cntrparam levels discrete 0
set cntrparam linear
unset clabel
unset key
set multiplot layout 1, n_panels title title_text."\nblack line: break-even (speed-up 1); blue: the policy is faster, red: slower" noenhanced
do for [i = 0:n_panels - 1] {
    set title panel_titles[i + 1] noenhanced
    set xrange [*:*] noextend
    set yrange [*:*] noextend
    splot datafile index i using 1:2:3 with pm3d notitle, \
          datafile index i using 1:2:3 with lines nosurface lw 2.5 lc rgb "#111111" notitle
}
unset multiplot

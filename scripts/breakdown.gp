# breakdown.gp — where the cost goes: one horizontal stacked bar per configuration (series),
# by op category, at the largest x of each panel; time (compute + network wait on the critical
# path) on the left, online bytes on the right, the categories' legend on the right. Data:
# datadir/bd_time_<p>.dat and bd_bytes_<p>.dat, one block per category (bar index, start,
# end, in tunit<p> / bunit<p>); ptitle<p>, nbars<p>, ncats<p>, bar<p>_<l> (bar labels),
# cat<p>_<k> and catlt<p>_<k> (name and colour of category k); npanels, maxbars, heading,
# subtitle.
width = 1300
height = 110 + npanels * (90 + 24 * maxbars)
load scriptdir."/plot_common.gp"
set multiplot layout npanels, 2 title heading."\n".subtitle noenhanced
set style fill solid 0.85 border rgb "#333333"
set grid xtics noytics
set xrange [0:*]
set format x "%g"
do for [p = 1:npanels] {
    nbars = value(sprintf("nbars%d", p))
    ncats = value(sprintf("ncats%d", p))
    set yrange [-0.6:nbars - 0.4] reverse
    do for [fig = 1:2] {
        if (fig == 1) {
            # the left margin fits the longest bar label (a protocol and a policy with their
            # options can be long), in characters of the default font: a ",9" one is narrower
            maxlen = 0
            do for [l = 0:nbars - 1] {
                n = strlen(value(sprintf("bar%d_%d", p, l)))
                maxlen = n > maxlen ? n : maxlen
            }
            set lmargin (maxlen * 0.8 + 3 > 30 ? int(maxlen * 0.8 + 3) : 30)
            set rmargin 1
            set ytics () font ",9" noenhanced
            do for [l = 0:nbars - 1] { set ytics add (value(sprintf("bar%d_%d", p, l)) l) }
            set title value(sprintf("ptitle%d", p)).": time" noenhanced
            set xlabel value(sprintf("tunit%d", p)) offset 0, 0.4
            unset key
        } else {
            set lmargin 2
            set rmargin 14
            unset ytics
            set title "online bytes" noenhanced
            set xlabel value(sprintf("bunit%d", p)) offset 0, 0.4
            set key outside right top vertical samplen 1.2 font ",9" noenhanced
        }
        f = sprintf("%s/bd_%s_%d.dat", datadir, fig == 1 ? "time" : "bytes", p)
        if (ncats > 0) {
            plot for [k = 0:ncats - 1] f index k using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.36) \
                 with boxxyerror lt value(sprintf("catlt%d_%d", p, k)) title value(sprintf("cat%d_%d", p, k))
        } else {
            plot NaN notitle
        }
    }
}
unset multiplot

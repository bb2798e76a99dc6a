# plot_common.gp — terminal and output for every mpcsim plot. `mpcsim plot` defines, before
# the plot's own script: term_name (pngcairo | png | svg | pdfcairo), outfile, datadir,
# scriptdir, subtitle (what every run shares: machine profile, threads), serieskeys (what a
# line's name is made of), nseries, and the plot's data variables; the plot script sets width
# and height (pixels; PDF pages get the same proportions) and loads this file.
if (term_name eq "svg") {
    eval sprintf("set terminal svg size %d,%d dynamic enhanced font 'sans,11' background '#ffffff'", width, height)
} else {
    if (term_name eq "pdfcairo") {
        eval sprintf("set terminal pdfcairo size %.2fin,%.2fin enhanced font 'sans,7'", width / 110.0, height / 110.0)
    } else {
        if (term_name eq "pngcairo") {
            eval sprintf("set terminal pngcairo size %d,%d enhanced font 'sans,10' background '#ffffff'", width, height)
        } else {
            eval sprintf("set terminal png size %d,%d", width, height)
        }
    }
}
set output outfile
set key noenhanced
set grid
# one colour per series, the same in every panel and plot (series 1..nseries)
array palette[12] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", \
                     "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#637939"]
do for [i = 1:12] {
    eval sprintf("set linetype %d lc rgb '%s' lw 2 pt %d ps 1.1", i, palette[i], 4 + 2 * ((i - 1) % 5))
}
set linetype cycle 12

# plot_common.gp — terminal and output for every mpcsim plot. `mpcsim plot` defines, before
# the plot's own script: term_name (pngcairo | png | svg), outfile, datadir, and the plot's
# data variables, and scriptdir; the plot script sets width and height and loads this file.
if (term_name eq "svg") {
    eval sprintf("set terminal svg size %d,%d dynamic enhanced font 'sans,11' background '#ffffff'", width, height)
} else {
    if (term_name eq "pngcairo") {
        eval sprintf("set terminal pngcairo size %d,%d enhanced font 'sans,10' background '#ffffff'", width, height)
    } else {
        eval sprintf("set terminal png size %d,%d", width, height)
    }
}
set output outfile
set key noenhanced
set grid

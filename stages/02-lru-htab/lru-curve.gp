# Plot lru-curve.csv (written by the guest's lru-miss-curve) as
# lru-curve.svg, one panel per trace. Run with: gnuplot -e "results='DIR'"
if (!exists("results")) results = "."
csv = results . "/lru-curve.csv"
set terminal svg size 960,760 dynamic font "DejaVu Sans,11"
set output results . "/lru-curve.svg"
set datafile separator ","
set multiplot layout 2,2
set key top right
set grid
set xlabel "LRU size (elements)"
set ylabel "misses (of 100000 lookups)"
set format x "%.0s%c"
series(trace, map, path, col) = sprintf("< awk -F, '$1 == \"%s\" && $3 == \"%s\" && $4 == \"%s\" { print $2 \",\" $%d }' %s", trace, map, path, col, csv)
# misses above (positive) or below the perfect LRU's at the same size
excess(trace, map, path) = sprintf("< awk -F, '$1 == \"%s\" && $3 == \"%s\" && $4 == \"%s\" { print $2 \",\" $7 - $8 }' %s", trace, map, path, csv)
do for [trace in "zipf.100k.a1_01.out zipf.100k.a0_01.out"] {
	set title trace noenhanced
	plot series(trace, "common", "prog", 8) using 1:2 with linespoints lw 3 pt 7 lc rgb "black" title "perfect LRU", \
	     series(trace, "common", "prog", 7) using 1:2 with linespoints pt 5 lc rgb "#1f77b4" title "common, BPF program", \
	     series(trace, "percpu", "prog", 7) using 1:2 with linespoints pt 4 lc rgb "#17becf" title "percpu, BPF program", \
	     series(trace, "common", "syscall", 7) using 1:2 with linespoints pt 9 lc rgb "#d62728" title "common, syscall", \
	     series(trace, "percpu", "syscall", 7) using 1:2 with linespoints pt 8 lc rgb "#ff7f0e" title "percpu, syscall"
}
set ylabel "misses minus the perfect LRU's"
do for [trace in "zipf.100k.a1_01.out zipf.100k.a0_01.out"] {
	set title trace noenhanced
	plot 0 with lines lw 3 lc rgb "black" title "perfect LRU", \
	     excess(trace, "common", "prog") using 1:2 with linespoints pt 5 lc rgb "#1f77b4" title "common, BPF program", \
	     excess(trace, "percpu", "prog") using 1:2 with linespoints pt 4 lc rgb "#17becf" title "percpu, BPF program", \
	     excess(trace, "common", "syscall") using 1:2 with linespoints pt 9 lc rgb "#d62728" title "common, syscall", \
	     excess(trace, "percpu", "syscall") using 1:2 with linespoints pt 8 lc rgb "#ff7f0e" title "percpu, syscall"
}
unset multiplot

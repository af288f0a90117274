# Plot lru-curve.csv (written by the guest's lru-miss-curve) as
# lru-curve.svg, one panel per trace. Run with: gnuplot -e "results='DIR'"
if (!exists("results")) results = "."
csv = results . "/lru-curve.csv"
set terminal svg size 960,420 dynamic font "DejaVu Sans,11"
set output results . "/lru-curve.svg"
set datafile separator ","
set multiplot layout 1,2
set key top right
set grid
set xlabel "LRU size (elements)"
set ylabel "misses (of 100000 lookups)"
set format x "%.0s%c"
series(trace, map, path, col) = sprintf("< awk -F, '$1 == \"%s\" && $3 == \"%s\" && $4 == \"%s\" { print $2 \",\" $%d }' %s", trace, map, path, col, csv)
do for [trace in "zipf.100k.a1_01.out zipf.100k.a0_01.out"] {
	set title trace noenhanced
	plot series(trace, "common", "prog", 8) using 1:2 with linespoints lw 2 dt 1 title "perfect LRU", \
	     series(trace, "common", "prog", 7) using 1:2 with linespoints title "common, BPF program", \
	     series(trace, "percpu", "prog", 7) using 1:2 with linespoints title "percpu, BPF program", \
	     series(trace, "common", "syscall", 7) using 1:2 with linespoints dt 2 title "common, syscall", \
	     series(trace, "percpu", "syscall", 7) using 1:2 with linespoints dt 2 title "percpu, syscall"
}
unset multiplot

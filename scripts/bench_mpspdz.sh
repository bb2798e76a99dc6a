#!/bin/sh
# bench_mpspdz.sh [-r RUNS] [-n N] [-v VARIANTS] [-o TSV] MPSPDZ_DIR [OP...] — the aby3 backend
# (build/release/bench_mpc) against MP-SPDZ's replicated-ring-party.x (three local processes,
# encrypted channels as both do by default), one element-wise op on N fixed-point values
# (default 65,536; f = 18 as mpcsim's aby3 default), RUNS times (default 7), the two programs
# alternating run by run. Ops: lt exp recip rsqrt mul (default all), and lt64. The two
# comparisons, each like for like: lt is MP-SPDZ's sfix comparison at k = 31, LTZ of the
# difference on k + 1 = 32 bits (Compiler/types.py sint.__lt__), against mpcsim's lt with the
# bound w=32 on the difference (bench_mpc --bits 32); lt64 compares on the whole ring in both
# (MP-SPDZ's sint comparison, LTZ on bit length 63 + 1 = 64; mpcsim's lt unbounded).
#
# MP-SPDZ runs each op compiled in up to three ways (-v, default "def y z3"): def =
# `compile.py -R 64`; y = `-R 64 -Y -b 100000` (edaBits, one vector of N instead of the
# default chunks of 1,000 elements); z3 = `-R 64 -Z 3 -b 100000` (local share conversion for
# three parties). Each of its processes runs the op 3 times: timer 1 is the first (cold), the
# median of timers 2 and 3 the warm time (P0's wall time, as bench_mpc's). Its CPU time is that
# of its three processes (bash `time`) minus that of the same program running no op (input and
# one reveal only), over the 3 runs; mpcsim's is (cold + 2 warm) / 3 from bench_mpc.
#
# MP-SPDZ is not built or installed by this project: without MPSPDZ_DIR/replicated-ring-party.x
# the script says so and exits 0. It writes mpcsim_op.mpc into MPSPDZ_DIR/Programs/Source and
# the compiled programs under MPSPDZ_DIR/Programs; its own files live in a temporary folder,
# removed at exit. Needs build/release/bench_mpc (make build/release/bench_mpc).
set -u
runs=7
n=65536
tsv=
variants="def y z3"
usage="usage: bench_mpspdz.sh [-r RUNS] [-n N] [-v VARIANTS] [-o TSV] MPSPDZ_DIR [OP...]"
while getopts r:n:o:v: o; do
    case $o in
    r) runs=$OPTARG ;;
    n) n=$OPTARG ;;
    o) tsv=$OPTARG ;;
    v) variants=$OPTARG ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ]; then
    echo "$usage" >&2
    exit 2
fi
for v in "$runs" "$n"; do
    case $v in
    '' | *[!0-9]* | 0*) echo "bench_mpspdz: -r and -n take positive integers" >&2; exit 2 ;;
    esac
done
for v in $variants; do
    case $v in
    def | y | z3) ;;
    *) echo "bench_mpspdz: unknown variant '$v' (def, y, z3)" >&2; exit 2 ;;
    esac
done
mp=$1
shift
ops=${*:-lt exp recip rsqrt mul}
if [ ! -x "$mp/replicated-ring-party.x" ] || [ ! -f "$mp/compile.py" ]; then
    echo "bench_mpspdz: no MP-SPDZ build at '$mp' (replicated-ring-party.x, compile.py):" \
        "skipped" >&2
    exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build/release/bench_mpc
if [ ! -x "$bench" ]; then
    echo "bench_mpspdz: $bench missing: make build/release/bench_mpc" >&2
    exit 1
fi
mp=$(cd "$mp" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mpcsim-mpspdz-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
runs_in=3

flags() {
    case $1 in
    def) echo "-R 64" ;;
    y) echo "-R 64 -Y -b 100000" ;;
    z3) echo "-R 64 -Z 3 -b 100000" ;;
    esac
}

cat > "$mp/Programs/Source/mpcsim_op.mpc" <<'EOF'
# One element-wise op on N fixed-point values, run RUNS times in one process:
# timer 1 = the first run (cold), timers 2.. = the following runs (warm).
# compile.py -R 64 [-Z 3 -b 100000] mpcsim_op OP N RUNS TAG (TAG only names the program)
from Compiler import mpc_math, ml

op = program.args[1]
n = int(program.args[2])
runs = int(program.args[3])

# mpcsim's aby3 default: ring 2^64, 18 fractional bits; k = 31 keeps 2k < 64, which
# MP-SPDZ's probabilistic truncation in Z_2^64 asks for (sfix.set_precision's docstring).
sfix.set_precision(18, 31)

x = sfix.get_input_from(0, size=n)
y = sfix.get_input_from(1, size=n)

def one():
    if op == 'mul':       # ring product, no truncation (bench_mpc's mul)
        return x.v * y.v
    if op == 'lt':        # sfix comparison: LTZ of the difference on k + 1 bits
        return x < y
    if op == 'lt64':      # the encodings compared on the whole ring (bit length 63)
        return x.v < y.v
    if op == 'exp':       # ml.exp: pow_fx(e, x) = exp2_fx(x log2 e)
        return ml.exp(x).v
    if op == 'recip':     # sfix division: FPDiv (Goldschmidt)
        return (1 / x).v
    if op == 'rsqrt':
        return mpc_math.InvertSqrt(x).v
    raise CompilerError('unknown op ' + op)

out = sint.Array(n)
for r in range(runs):
    break_point()
    start_timer(r + 1)
    out.assign(one())
    break_point()
    stop_timer(r + 1)
print_ln('check %s', out[0].reveal())
EOF

# Inputs as bench_mpc's: [-1, 1), or [0.5, 8.5) for the positive-domain ops.
for p in 0 1; do
    awk -v n="$n" -v s=$((7 + p)) 'BEGIN { srand(s); for (i = 0; i < n; i++)
        printf "%.6f\n", 2 * rand() - 1 }' > "$work/sym-P$p-0"
    awk -v n="$n" -v s=$((7 + p)) 'BEGIN { srand(s); for (i = 0; i < n; i++)
        printf "%.6f\n", 0.5 + 8 * rand() }' > "$work/pos-P$p-0"
done

if [ ! -f "$mp/Player-Data/P0.pem" ] || [ ! -f "$mp/Player-Data/P2.key" ]; then
    (cd "$mp" && Scripts/setup-ssl.sh 3 > "$work/ssl.log" 2>&1) ||
        { echo "bench_mpspdz: Scripts/setup-ssl.sh 3 failed" >&2; cat "$work/ssl.log" >&2; exit 1; }
fi

compile() { # VARIANT OP RUNS
    # shellcheck disable=SC2046
    (cd "$mp" && ./compile.py $(flags "$1") mpcsim_op "$2" "$n" "$3" "$1") \
        > "$work/compile.log" 2>&1 ||
        { echo "bench_mpspdz: compiling $2 ($1) failed" >&2; tail -20 "$work/compile.log" >&2
          exit 1; }
}
echo "bench_mpspdz: compiling the MP-SPDZ programs" >&2
for v in $variants; do
    compile "$v" none 0
    for op in $ops; do
        compile "$v" "$op" "$runs_in"
    done
done

port=$((14000 + $$ % 1000 * 10))
# mp_run PROG INPUTS: P0's output in $work/p0.log, the three processes' CPU ms in $cpu
mp_run() {
    port=$((port + 3))
    [ $port -gt 30000 ] && port=14000
    for p in 0 1 2; do
        # bash's time keyword: user and system seconds of the process and its threads
        (cd "$mp" && W=$work P=$p bash -c 'TIMEFORMAT="%U %S"
            { time "$@" > "$W/p$P.log" 2>&1; echo $? > "$W/rc$P"; } 2> "$W/t$P"' _ \
            ./replicated-ring-party.x "$p" "$1" -pn "$port" -h localhost -IF "$work/$2") &
    done
    wait
    for p in 0 1 2; do
        if [ "$(cat "$work/rc$p")" != 0 ] || ! grep -q '^check' "$work/p0.log"; then
            echo "bench_mpspdz: MP-SPDZ party $p failed on $1:" >&2
            tail -5 "$work/p$p.log" >&2
            exit 1
        fi
    done
    cpu=$(cat "$work/t0" "$work/t1" "$work/t2" |
        awk '{ s += $1 + $2 } END { printf "%.1f", s * 1e3 }')
}

# rows: op system metric value
out=$work/rows
: > "$out"
i=0
while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    echo "bench_mpspdz: run $i of $runs" >&2
    for op in $ops; do
        in=sym
        case $op in recip|rsqrt) in=pos ;; esac
        mop=$op
        bits=
        [ "$op" = lt64 ] && mop=lt
        [ "$op" = lt ] && bits="--bits 32"
        # shellcheck disable=SC2086
        line=$("$bench" --op "$mop" --protocol aby3 --n "$n" --reps 5 --warmup 1 $bits | tail -1)
        # proto op n min median rounds online offline B/elem coldcpu coldflt warmcpu warmflt coldms
        echo "$line" | awk -v op="$op" '{ printf "%s mpcsim cold_ms %s\n%s mpcsim warm_ms %s\n" \
            "%s mpcsim cpu_op %.1f\n", op, $14, op, $5, op, ($10 + 2 * $12) / 3 }' >> "$out"
        for v in $variants; do
            mp_run "mpcsim_op-none-$n-0-$v" "$in"
            c0=$cpu
            mp_run "mpcsim_op-$op-$n-$runs_in-$v" "$in"
            c3=$cpu
            sed -n 's/^Time\([0-9]*\) = \([0-9.e-]*\) seconds.*/\1 \2/p' "$work/p0.log" |
                awk -v op="$op" -v sys="mpspdz-$v" -v c0="$c0" -v c3="$c3" -v r="$runs_in" '
                    $1 == 1 { cold = $2 * 1e3 }
                    $1 > 1 { w[++k] = $2 * 1e3 }
                    END {
                        for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++)
                            if (w[b] < w[a]) { t = w[a]; w[a] = w[b]; w[b] = t }
                        warm = k % 2 ? w[(k + 1) / 2] : (w[k / 2] + w[k / 2 + 1]) / 2
                        printf "%s %s cold_ms %.3f\n%s %s warm_ms %.3f\n", op, sys, cold, op,
                            sys, warm
                        printf "%s %s cpu_op %.1f\n", op, sys, (c3 - c0) / r
                    }' >> "$out"
            sed -n 's/^Time1 = .*(\(.*\))$/\1/p' "$work/p0.log" |
                awk -v op="$op" -v sys="mpspdz-$v" '{ print op, sys, "timer1", $0 }' >> "$out"
        done
    done
done
[ -n "$tsv" ] && cp "$out" "$tsv"

echo "# medians of $runs alternating runs, N = $n; ms; cpu_op: CPU ms of the three parties per"
echo "# op over its first 3 runs; x VARIANT: mpcsim's median / MP-SPDZ's (below 1: mpcsim faster)"
printf '%-6s %-9s %9s' op metric mpcsim
for v in $variants; do printf ' %10s %7s' "mp-$v" "x $v"; done
echo
# the median of the values of op $1, system $2, metric $3 ("nan" if none)
med() {
    awk -v op="$1" -v s="$2" -v m="$3" '$1 == op && $2 == s && $3 == m { print $4 }' "$out" |
        sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "nan"; else
            print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for op in $ops; do
    for m in cold_ms warm_ms cpu_op; do
        a=$(med "$op" mpcsim "$m")
        printf '%-6s %-9s %9.1f' "$op" "$m" "$a"
        for v in $variants; do
            b=$(med "$op" "mpspdz-$v" "$m")
            echo "$a $b" | awk '{ printf " %10.1f %7.3f", $2, ($2 > 0 ? $1 / $2 : 0) }'
        done
        echo
    done
done
echo "# MP-SPDZ's first timer at P0 (its data sent, rounds), last run:"
for op in $ops; do
    for v in $variants; do
        awk -v op="$op" -v s="mpspdz-$v" '$1 == op && $2 == s && $3 == "timer1" {
            $1 = $2 = $3 = ""; l = $0 } END { print op, s ":" l }' "$out"
    done
done

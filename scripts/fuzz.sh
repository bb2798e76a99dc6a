#!/bin/sh
# fuzz.sh SECONDS TARGET... — runs each libFuzzer target (build/fuzz/fuzz_TARGET) for SECONDS on
# a scratch copy of its seed corpus (tests/fuzz/corpus/TARGET, left unchanged), then prints one
# line per target: executions, new corpus units, crashes. A crashing input is saved as
# tests/fuzz/regress/TARGET/crash-<sha1> (replayed by make check from then on) and the script
# exits 1 after all targets ran.
set -u
secs=$1
shift
fail=0
work=$(mktemp -d "${TMPDIR:-/tmp}/mpcsim-fuzz-run-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
printf '%-11s %10s %8s %7s %s\n' target execs exec/s crashes corpus
for t in "$@"; do
    mkdir -p "$work/$t/corpus" "$work/$t/art"
    log="$work/$t/log"
    # -rss_limit_mb: the parsers must refuse sizes they cannot hold, not try to allocate them
    TMPDIR="$work/$t" build/fuzz/fuzz_"$t" -max_total_time="$secs" -print_final_stats=1 \
        -rss_limit_mb=2048 -timeout=30 -artifact_prefix="$work/$t/art/" \
        "$work/$t/corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(ls "$work/$t/corpus" | wc -l)
    crashes=$(ls "$work/$t/art" | wc -l)
    printf '%-11s %10s %8s %7s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes" "$units"
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        fail=1
        mkdir -p "tests/fuzz/regress/$t"
        for a in "$work/$t/art"/*; do
            [ -f "$a" ] || continue
            cp "$a" "tests/fuzz/regress/$t/$(basename "$a")"
            echo "  saved tests/fuzz/regress/$t/$(basename "$a")"
        done
        grep -m1 -A12 'ERROR\|runtime error\|deadly signal' "$log" | sed 's/^/  /'
    fi
done
exit $fail

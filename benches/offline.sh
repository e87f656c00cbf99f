#!/usr/bin/env bash
# Offline-side figures of issue #3, side by side in one run:
#   decode to /dev/null (sorted, unsorted) of 10M records from 4 threads,
#   sorted decode from 1 and 64 logging threads,
#   stats --site --arg 0 against grep/awk/sort over the decoded text.
# Usage: bash benches/offline.sh [RECORDS]   (logs go to $TMPDIR or /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
T=${TMPDIR:-/tmp}
cargo build -q --release -p nanolog-cli
cargo build -q --release -p nanolog --example gen_log
BIN=target/release/nanolog
GEN=target/release/examples/gen_log

best() { # best wall time of 3 runs, in seconds
    local best=999999
    for _ in 1 2 3; do
        local s e
        s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N)
        best=$(echo "$e - $s" | bc -l | awk -v b="$best" '{print ($1 < b) ? $1 : b}')
    done
    echo "$best"
}
rate() { echo "$1 $2" | awk '{printf "%.1f", $1 / $2 / 1e6}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$GEN" "$T/nl-4.nlog" 4 "$N" >/dev/null
cat "$T/nl-4.nlog" >/dev/null   # into the page cache
t=$(best "$BIN" decode "$T/nl-4.nlog"); echo "decode sorted,   4 threads: ${t}s  $(rate "$N" "$t") M rec/s"
t=$(best "$BIN" decode --unsorted "$T/nl-4.nlog"); echo "decode unsorted, 4 threads: ${t}s  $(rate "$N" "$t") M rec/s"
tt=$(best "$BIN" decode "$T/nl-4.nlog")
tj=$(best "$BIN" decode --format json "$T/nl-4.nlog")
echo "decode sorted text vs JSON, same run: text ${tt}s  json ${tj}s  ($(echo "$tj $tt" | awk '{printf "%.2f", $1 / $2}')x)"
for th in 1 64; do
    "$GEN" "$T/nl-$th.nlog" "$th" "$N" >/dev/null
    t=$(best "$BIN" decode "$T/nl-$th.nlog"); echo "decode sorted, $th threads: ${t}s  $(rate "$N" "$t") M rec/s"
    rm -f "$T/nl-$th.nlog"
done
t=$(best "$BIN" stats --site 'Hello World' --arg 0 "$T/nl-4.nlog"); echo "stats --site --arg 0: ${t}s  $(rate "$N" "$t") M rec/s"
"$BIN" decode "$T/nl-4.nlog" > "$T/nl-4.txt"
agg() {
    grep -F 'Hello World # ' "$1" | awk '{print $NF}' | sort -n | awk '
      { v[NR] = $1; s += $1 }
      END { n = NR; printf "%d %s %s %.1f %s %s %s\n", n, v[1], v[n], s / n,
            v[int(n * 0.50 + 0.999999)], v[int(n * 0.90 + 0.999999)], v[int(n * 0.99 + 0.999999)] }'
}
export -f agg
t2=$(best bash -c "agg $T/nl-4.txt")
echo "grep|awk|sort|awk over the decoded text ($(du -h "$T/nl-4.txt" | cut -f1)): ${t2}s  ($(echo "$t2 $t" | awk '{printf "%.1f", $1 / $2}')x slower than stats)"
echo "same answer: $(bash -c "agg $T/nl-4.txt")  vs  $("$BIN" stats --format json --site 'Hello World' --arg 0 "$T/nl-4.nlog")"
rm -f "$T/nl-4.nlog" "$T/nl-4.txt"

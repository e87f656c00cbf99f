#!/usr/bin/env bash
# Regenerates every figure of issue #9 in one go (about 3 minutes on the
# 2-core CI machine: 3 min 7 s at 7d19abd), side by side in one session:
#   1. the paper's Table 3 messages under the issue's protocol, with the
#      floor and two logging threads (benches/table3.rs);
#   2. nanolog and the Rust peers on the same messages (bench-peers/, its
#      own workspace, so the peers never enter the library's dependencies);
#   3. the charts (SVG) from both outputs;
#   4. nanolog and C++ NanoLog alternated run by run (bench-peers alternate),
#      only when CPP_NANOLOG_DRIVER names a driver built outside the
#      repository (see bench-peers/src/alternate.rs; 8 minutes); without it,
#      the report and chart are redrawn from the committed session;
#   5. the two sides of a ring apart (benches/split.rs: the logging thread
#      alone, the flusher alone) and the compaction of a run of records on
#      one core (benches/compact.rs): the code's own costs, steadier than 1-4 when
#      the host moves the two vCPUs between near and distant cores.
# Outputs: benches/results/{table3.txt,peers.csv,peers.txt,side-by-side.{csv,md},
# split.txt,compact.txt}, benches/charts/*.svg.
# Usage: bash benches/regenerate.sh [SCALE]   (SCALE divides every call count; default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${1:-1}
mkdir -p benches/results benches/charts

echo "== Table 3, nanolog (cargo bench --bench table3)"
NANOLOG_T3_SCALE=$SCALE cargo bench -q --bench table3 2>/dev/null | tee benches/results/table3.txt

echo "== nanolog and the Rust peers (bench-peers)"
(
    cd bench-peers
    cargo build -q --release
    ./target/release/nanolog-bench-peers all "$SCALE" | tee ../benches/results/peers.txt
    mv results.csv ../benches/results/peers.csv
    ./target/release/nanolog-bench-peers chart ../benches/results/peers.csv ../benches/charts
    ./target/release/nanolog-bench-peers table3-chart ../benches/results/table3.txt ../benches/charts
)

echo "== nanolog and C++ NanoLog alternated (bench-peers alternate)"
(
    cd bench-peers
    if [ -n "${CPP_NANOLOG_DRIVER:-}" ]; then
        ./target/release/nanolog-bench-peers alternate $((480 / SCALE)) \
            ../benches/results/side-by-side.csv "C++ NanoLog=$CPP_NANOLOG_DRIVER"
    fi
    ./target/release/nanolog-bench-peers alternate-report ../benches/results/side-by-side.csv \
        ../benches/charts | tee ../benches/results/side-by-side.md
)

echo "== The two sides of a ring apart (cargo bench --bench split)"
cargo bench -q --bench split 2>/dev/null | tee benches/results/split.txt

echo "== Compaction of a run of records on one core (cargo bench --bench compact)"
cargo bench -q --bench compact 2>/dev/null | grep -E '^compact/|time:' | tee benches/results/compact.txt

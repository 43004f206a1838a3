#!/usr/bin/env bash
# Reading and binning a large Parquet file: seconds and peak memory of `sapwood train`'s two
# streamed passes (sample for cuts, then bin), from its --summary (one boosting round).
#
#   bash bench/read_and_bin.sh [rows]        (default 10,000,000 x 28)
# requires: numpy, pyarrow (for the generator), a release build of the CLI
set -euo pipefail
cd "$(dirname "$0")/.."
rows="${1:-10000000}"
py="${PYTHON:-python3}"
data="${TMPDIR:-/tmp}/sapwood-synthetic-$rows.parquet"
[ -f "$data" ] || "$py" datasets/make_synthetic.py --rows "$rows" --out "$data"
cargo build --release -q -p sapwood-cli
summary="$(mktemp)"
./target/release/sapwood train --quiet --data "$data" --label y --objective binary:logistic \
  --rounds 1 --threads 2 --model "$(mktemp)" --summary "$summary"
"$py" - "$summary" "$data" "$rows" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[2]) / 2**20
rows = int(sys.argv[3])
binned = rows * s["features"] / 2**20
print(f"file: {sys.argv[2]} ({size:.0f} MiB, {rows} rows x {s['features']} features)")
print(f"read + bin (two streamed passes): {s['data_loading_seconds']:.2f} s, "
      f"{rows / s['data_loading_seconds'] / 1e6:.2f} M rows/s")
print(f"peak memory after reading and binning: {s['data_loading_peak_memory_mib']:.0f} MiB "
      f"(binned matrix {binned:.0f} MiB; the raw f32 values would be {4 * binned:.0f} MiB)")
print(f"peak memory of the whole run (one boosting round): {s['peak_memory_mib']:.0f} MiB")
PY

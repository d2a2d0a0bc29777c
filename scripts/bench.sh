#!/usr/bin/env bash
# Benchmark: countersign against the limit of its own architecture, in one
# run, on this machine (see BENCHMARKS.md for what each figure means).
# Starts its own redis-server, countersign serve and limit handler on
# loopback (free ports), and stops them when it ends. Never touches the
# Redis on 6379.
#
#   scripts/bench.sh [-duration 8s] [-rounds 2] [-c 32] [-loop-c 16] [-profile -out DIR] …
#   scripts/bench.sh -phases memory -mem-n 2000          # one part only
#   scripts/bench.sh -phases cluster -cluster-shards 1,16 # loops/s on a 3-master cluster per shard count (needs redis-cli)
#   scripts/bench.sh -phases gateway                      # an MCP pass-through call: through countersign against direct
#
# Takes about 4 minutes with the defaults (the draft-expiry measurement
# waits a minute; -mem-expiry=false skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
command -v redis-server >/dev/null || { echo "bench: redis-server is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/countersign" ./cmd/countersign
go build -o "$tmp/bench" ./tools/bench
go build -o "$tmp/hostile-upstream" ./internal/testing/mcpupstream/cmd/hostile-upstream
"$tmp/bench" -countersign "$tmp/countersign" -upstream "$tmp/hostile-upstream" "$@"

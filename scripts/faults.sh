#!/usr/bin/env bash
# The fault suite, long version: builds countersign once, runs every
# scenario of faults/ (real redis-server processes with AOF on private
# ports, three `countersign serve` processes, an SMTP sink and an ETag
# target) and prints the table that docs/reliability.md records.
#
#   scripts/faults.sh                 # long run, a few minutes
#   scripts/faults.sh -short          # the short run CI does
#   COUNTERSIGN_FAULTS_SEED=123 scripts/faults.sh -run TestProxyFaults   # replay one scenario
#
# Needs redis-server and redis-cli on PATH (apt-get install redis-server).
# Loopback only; stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
command -v redis-server >/dev/null || { echo "faults: redis-server is not installed" >&2; exit 1; }
export COUNTERSIGN_REQUIRE_REDIS_SERVER=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "faults: building countersign"
go build -o "$work/countersign" ./cmd/countersign
export COUNTERSIGN_FAULTS_BIN="$work/countersign"
export COUNTERSIGN_FAULTS_TABLE="$work/table.md"

status=0
go test -tags faults -count=1 -timeout 30m "$@" ./faults/ -v >"$work/log" 2>&1 || status=$?
grep -E '^(=== RUN|--- (PASS|FAIL)|    [a-z_]+_test\.go:[0-9]+:)' "$work/log" || true
echo
if [ -s "$work/table.md" ]; then
  cat "$work/table.md"
else
  tail -n 50 "$work/log"
fi
if [ $status -ne 0 ]; then
  echo "faults: FAILED (full log above; replica logs are printed for failed scenarios)" >&2
  tail -n 200 "$work/log" >&2
fi
exit $status

#!/usr/bin/env bash
# Load test: the whole loop (prepare → send → webhook link → approval page →
# execution over SMTP → agent sees succeeded), many agents at once, against a
# real countersign process on a real Redis. Loopback only; stops by itself.
#
#   scripts/load.sh [-c 8] [-duration 20s]
#
# Uses Redis DB 14 on 127.0.0.1:6379 (flushed) unless LOAD_REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

redis_url=${LOAD_REDIS_URL:-redis://127.0.0.1:6379/14}
if [ -z "${LOAD_REDIS_URL:-}" ]; then
  redis-cli -n 14 flushdb >/dev/null
fi

go build -o "$tmp/countersign" ./cmd/countersign
go build -o "$tmp/load" ./tools/load
key=$("$tmp/countersign" keygen --id load-agent | sed -n 2p | tr -d ' ')
hash=$(printf %s "$key" | sha256sum | cut -d' ' -f1)

cat > "$tmp/countersign.yaml" <<YAML
principals:
  - {id: load-agent, api_key_sha256: "$hash", scopes: [email.send]}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
webhooks:
  - {name: humans, url: "http://127.0.0.1:18099/", links: true}
settings: {api_rate: 100000}
routes:
  - {name: load, match: {action: email.send}, approvers: {groups: [owners]}, required: 1, notify: ["webhook:humans"]}
YAML

if curl -s -o /dev/null http://127.0.0.1:18080/; then
  echo "load: something already listens on 127.0.0.1:18080; stop it first" >&2
  exit 1
fi
COUNTERSIGN_CONFIG="$tmp/countersign.yaml" COUNTERSIGN_REDIS_URL="$redis_url" \
COUNTERSIGN_LISTEN=127.0.0.1:18080 COUNTERSIGN_SMTP_URL="smtp://127.0.0.1:18025?tls=none&from=load@example.test" \
COUNTERSIGN_LINK_KEYS="k1:$(head -c 32 /dev/urandom | base64)" COUNTERSIGN_AUDIT_FILE="$tmp/audit.jsonl" \
  "$tmp/countersign" serve 2>"$tmp/serve.log" &
for _ in $(seq 50); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.1; done

echo "machine: $(nproc) cores, $(uname -sr); redis: $redis_url"
status=0
COUNTERSIGN_API_KEY="$key" "$tmp/load" -url http://127.0.0.1:18080 "$@" || status=$?
warn=$(grep -c '"level":"\(WARN\|ERROR\)"' "$tmp/serve.log" || true)
echo "service log: $warn warnings or errors"
grep '"level":"\(WARN\|ERROR\)"' "$tmp/serve.log" | head -5
exit $status

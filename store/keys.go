package store

import (
	"crypto/sha256"
	"encoding/hex"
)

// Every Redis key of countersign is built here. The part in braces is the
// Cluster hash tag: all keys of one operation share "{op_…}", so every
// script touches one slot; the work queue's two keys share "{queue}".

const prefix = "cs:"

// opKey is the operation itself. HASH: doc (immutable JSON), status,
// expires_at, updated_at, created_at, version, required, payload_hash,
// principal, sent_at, jobs, rejection, result, error, undone_by.
func opKey(k string) string { return prefix + "{" + k + "}:op" }

// approvalsKey holds one approval per approver. HASH approver → Decision JSON.
func approvalsKey(k string) string { return prefix + "{" + k + "}:approvals" }

// deliveriesKey records delivered notifications. HASH job id → Delivery JSON.
func deliveriesKey(k string) string { return prefix + "{" + k + "}:deliveries" }

// capsKey holds issued links by nonce hash. HASH sha256(nonce) → Capability JSON.
func capsKey(k string) string { return prefix + "{" + k + "}:caps" }

// eventsKey is the audit trail. LIST of Event JSON, oldest first.
func eventsKey(k string) string { return prefix + "{" + k + "}:events" }

// syncedKey records what each editable message last showed. HASH job id → mark.
func syncedKey(k string) string { return prefix + "{" + k + "}:synced" }

// leaseKey is a short exclusive lease. STRING with a PX expiry.
func leaseKey(k, name string) string { return prefix + "{" + k + "}:lease:" + name }

// opKeys lists the keys whose lifetime follows the operation's.
func opKeys(k string) []string {
	return []string{opKey(k), eventsKey(k), approvalsKey(k), deliveriesKey(k), capsKey(k), syncedKey(k)}
}

// idemKey binds a principal's idempotency key. STRING: IdemBinding JSON.
// Hashed so that any printable key is safe inside a Redis key and a tag.
func idemKey(principal, key string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + key))
	return prefix + "idem:{" + hex.EncodeToString(sum[:16]) + "}"
}

// principalOpsKey indexes a principal's operations. ZSET op key → created (ms).
func principalOpsKey(principal string) string { return prefix + "{principal:" + principal + "}:ops" }

// streamKey is the work queue. STREAM of {op: key}, consumer group groupName.
func streamKey() string { return prefix + "{queue}:stream" }

// timersKey holds future wake-ups. ZSET "key|reason" → due time (ms).
func timersKey() string { return prefix + "{queue}:timers" }

// groupName is the consumer group of the workers.
const groupName = "workers"

// changesChannel is the pub/sub channel on which every transition
// publishes the operation key, so long-polls on any replica wake at once.
const changesChannel = prefix + "changes"

// limitKey counts attempts for a rate limit. STRING counter with PX expiry.
func limitKey(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return prefix + "limit:{" + hex.EncodeToString(sum[:12]) + "}"
}

// onceKey remembers a one-time token (a Slack payload already handled).
// STRING with PX expiry.
func onceKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + "once:{" + hex.EncodeToString(sum[:16]) + "}"
}

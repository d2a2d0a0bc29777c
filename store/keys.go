package store

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"strconv"
)

// Every Redis key of countersign is built here.
//
// Data lives in shards. A shard is a Cluster hash tag, "{s3.17}", and all
// keys in braces of one shard hash to one slot, so every script touches
// one slot. A principal's operations, its quota counters, its index and
// the work queue of its shard live together: that is what lets one script
// store an operation and count it against the principal's quotas
// atomically, and wake the workers in the same step. Principals are spread
// over the shards by a hash of their id; the shard tags are chosen so that
// the shards are spread evenly over the slot space (and so over the
// masters of a cluster that splits the slots in equal ranges).
//
// The number of shards is fixed for a deployment (recorded in metaKey):
// changing it would move principals to other shards.

const prefix = "cs:"

// DefaultShards spreads the data over the masters of small clusters.
const DefaultShards = 16

// shards holds the tags of every shard and maps principals to them.
type shards struct {
	tags []string // tags[i] is "{…}" of shard i
}

func newShards(n int) shards {
	s := shards{tags: make([]string, n)}
	for i := range n {
		lo, hi := i*16384/n, (i+1)*16384/n
		for j := 0; ; j++ {
			t := "s" + strconv.Itoa(i) + "." + strconv.Itoa(j)
			if sl := slotOf(t); sl >= lo && sl < hi {
				s.tags[i] = "{" + t + "}"
				break
			}
		}
	}
	return s
}

// of returns the tag of the shard that keeps principal's data.
func (s shards) of(principal string) string {
	return s.tags[crc32.ChecksumIEEE([]byte(principal))%uint32(len(s.tags))]
}

// opKey is one operation. HASH: see codec.go for the fields.
func opKey(tag, k string) string { return prefix + tag + ":o:" + k }

// eventsKey was an operation's audit trail (LIST of compact event JSON,
// oldest first); the trail is now the operation hash's ev field, and the
// list is read only for operations stored before.
func eventsKey(tag, k string) string { return prefix + tag + ":e:" + k }

// leaseKey is a short exclusive lease on part of an operation's work.
// STRING holding the holder's token, with a PX expiry.
func leaseKey(tag, k, name string) string { return prefix + tag + ":l:" + k + ":" + name }

// countersKey holds a principal's quota and rate counters. HASH: nd drafts,
// np pending (sent and not yet ended), nq approved (of np, those awaiting
// their claim; for the gauges), nb stored bytes, rw/rn request
// window start and count, sw/sn send window start and count.
func countersKey(tag, principal string) string { return prefix + tag + ":p:" + principal }

// allowancesKey holds a principal's allowances. HASH: <id> the allowance
// (JSON), <id>:x its end (ms), <id>:c operations left, <id>:s sum left,
// <id>:r when it was revoked. The id is its allowance.grant operation.
func allowancesKey(tag, principal string) string { return prefix + tag + ":al:" + principal }

// indexKey lists a principal's operations. ZSET op key → created (ms).
func indexKey(tag, principal string) string { return prefix + tag + ":pi:" + principal }

// idemKey binds a principal's idempotency key. STRING "op key|payload
// hash", living as long as the operation. Hashed so that any printable key
// is safe inside a Redis key.
func idemKey(tag, principal, key string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + key))
	return prefix + tag + ":ik:" + hex.EncodeToString(sum[:16])
}

// streamKey is the shard's work queue. STREAM of {o: op key, p: principal},
// consumer group groupName.
func streamKey(tag string) string { return prefix + tag + ":q" }

// timersKey holds future wake-ups. ZSET "op key|principal|reason" → due (ms).
func timersKey(tag string) string { return prefix + tag + ":t" }

// dueKey indexes operations by the end of their window, so expiry costs
// what is due, not what is stored. ZSET "op key|principal" → expires (ms).
func dueKey(tag string) string { return prefix + tag + ":d" }

// executingKey indexes claimed operations, for the stuck scan.
// ZSET "op key|principal" → claimed (ms).
func executingKey(tag string) string { return prefix + tag + ":x" }

// goneKey schedules the release of stored bytes when an ended operation's
// keys expire. ZSET "principal|bytes|op key" → deletion time (ms).
func goneKey(tag string) string { return prefix + tag + ":g" }

// auditKey is the shard's audit chain before it is sealed: every event of
// every operation of the shard, in the order the scripts wrote them.
// STREAM of {k: op key, h: payload hash, e: compact event}.
func auditKey(tag string) string { return prefix + tag + ":a" }

// auditHeadKey is where the shard's chain stands. HASH: id (last sealed
// stream id), seq, hash, cp (last checkpoint, ms), since (entries after it).
func auditHeadKey(tag string) string { return prefix + tag + ":ah" }

// auditLeaseKey is held by the one replica that seals the audit log.
// STRING holder, PX expiry.
const auditLeaseKey = prefix + "audit:lease"

// opKeys are the KEYS of every operation script, in the order the Lua
// prelude names them.
func opKeys(tag, principal, k string) []string {
	return []string{opKey(tag, k), eventsKey(tag, k), countersKey(tag, principal), streamKey(tag),
		timersKey(tag), dueKey(tag), executingKey(tag), goneKey(tag), indexKey(tag, principal), auditKey(tag)}
}

// A script that finds operations at run time, from the members of a shard
// index ("op key|principal"), gets the prefix of the keys it builds from
// these, so that the key format stays in this file: the key is the prefix
// followed by the operation key (or the principal). Each is the builder
// above with an empty last part.

// opKeyPrefix is opKey(tag, k) without k.
func opKeyPrefix(tag string) string { return opKey(tag, "") }

// eventsKeyPrefix is eventsKey(tag, k) without k.
func eventsKeyPrefix(tag string) string { return eventsKey(tag, "") }

// countersKeyPrefix is countersKey(tag, principal) without the principal.
func countersKeyPrefix(tag string) string { return countersKey(tag, "") }

// groupName is the consumer group of the workers on every shard stream.
const groupName = "workers"

// durableKey is a shard's durability probe (STRING, a counter): written
// after every transition when transitions wait for replicas, so that WAIT
// on that connection covers everything the master had (durable.go).
func durableKey(tag string) string { return prefix + tag + ":w" }

// metaKey records facts fixed for a deployment. HASH: shards.
const metaKey = prefix + "meta"

// readyKey is written by the readiness probe: a store that refuses this
// write (out of memory, a read-only replica) is not ready.
func readyKey(node string) string { return prefix + "ready:" + node }

// changesChannel is the pub/sub channel on which every transition
// publishes the operation key, so long-polls on any replica wake at once.
const changesChannel = prefix + "changes"

// limitKey counts attempts for a rate limit not tied to a principal (failed
// link attempts per client address). STRING counter with PX expiry.
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

// An approver's passkeys and enrolment links share the approver's own
// hash tag, "{a.<approver id>}", so that using up a link and storing the
// passkey it registered is one script on one slot.
func approverTag(approver string) string { return "{a." + approver + "}" }

// passkeysKey holds an approver's passkeys. HASH: c:<credential id,
// base64url> → credential JSON (approval.PasskeyCredential), s:<id> → its
// sign count.
func passkeysKey(approver string) string { return prefix + approverTag(approver) + ":pk" }

// enrolKey is one live enrolment link of an approver. STRING "1" with a
// PX expiry, deleted when used.
func enrolKey(approver, nonceHash string) string {
	return prefix + approverTag(approver) + ":en:" + nonceHash
}

// sessionKey is one sign-in session of the inbox or console, by the
// SHA-256 of its cookie value. STRING session JSON with a PX expiry.
func sessionKey(idHash string) string { return prefix + "session:{" + idHash + "}" }

// signinKey is one sign-in under way (OIDC state, nonce, PKCE verifier),
// by the SHA-256 of its state. STRING JSON with a PX expiry, read once.
func signinKey(stateHash string) string { return prefix + "signin:{" + stateHash + "}" }

// slotOf is Redis Cluster's key slot: CRC16/XMODEM of the hash tag, mod 16384.
func slotOf(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				break
			}
		}
		break
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

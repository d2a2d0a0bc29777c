package store

import (
	"testing"
)

// The key names are part of the data format: changing one orphans stored
// operations. This test pins them.
func TestKeyNames(t *testing.T) {
	sh := newShards(DefaultShards)
	k, p := "op_abcdefghijklmnopqrstuvwxyz", "support-agent"
	tag := sh.of(p)
	tests := []struct{ got, want string }{
		{tag, "{s15.42}"},
		{opKey(tag, k), "cs:{s15.42}:o:op_abcdefghijklmnopqrstuvwxyz"},
		{eventsKey(tag, k), "cs:{s15.42}:e:op_abcdefghijklmnopqrstuvwxyz"},
		{leaseKey(tag, k, "job:email:grace"), "cs:{s15.42}:l:op_abcdefghijklmnopqrstuvwxyz:job:email:grace"},
		{countersKey(tag, p), "cs:{s15.42}:p:support-agent"},
		{indexKey(tag, p), "cs:{s15.42}:pi:support-agent"},
		{idemKey(tag, p, "k1"), "cs:{s15.42}:ik:aa1784e8784656c29c6e0b1e320a3a79"},
		{streamKey(tag), "cs:{s15.42}:q"},
		{timersKey(tag), "cs:{s15.42}:t"},
		{dueKey(tag), "cs:{s15.42}:d"},
		{executingKey(tag), "cs:{s15.42}:x"},
		{goneKey(tag), "cs:{s15.42}:g"},
		{durableKey(tag), "cs:{s15.42}:w"},
		{allowancesKey(tag, p), "cs:{s15.42}:al:support-agent"},
		{auditKey(tag), "cs:{s15.42}:a"},
		{auditHeadKey(tag), "cs:{s15.42}:ah"},
		{auditLeaseKey, "cs:audit:lease"},
		{opKeyPrefix(tag) + k, opKey(tag, k)},
		{opKeyPrefix(tag), "cs:{s15.42}:o:"},
		{eventsKeyPrefix(tag), "cs:{s15.42}:e:"},
		{countersKeyPrefix(tag), "cs:{s15.42}:p:"},
		{countersKeyPrefix(tag) + p, countersKey(tag, p)},
		{metaKey, "cs:meta"},
		{changesChannel, "cs:changes"},
		{passkeysKey("grace"), "cs:{a.grace}:pk"},
		{enrolKey("grace", "ab12"), "cs:{a.grace}:en:ab12"},
		{sessionKey("5e55"), "cs:session:{5e55}"},
		{signinKey("57a7"), "cs:signin:{57a7}"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key = %q, want %q", tt.got, tt.want)
		}
	}
}

// Every key a script touches must hash to its shard's slot.
func TestShardKeysShareSlot(t *testing.T) {
	sh := newShards(DefaultShards)
	for _, p := range []string{"support-agent", "dev-agent", "a", "billing.bot-2"} {
		tag := sh.of(p)
		k := "op_abcdefghijklmnopqrstuvwxyz"
		keys := append(opKeys(tag, p, k), leaseKey(tag, k, "x"), idemKey(tag, p, "x"), allowancesKey(tag, p),
			opKeyPrefix(tag)+"op_other", countersKeyPrefix(tag)+"other-agent")
		want := slotOf(keys[0])
		for _, key := range keys {
			if got := slotOf(key); got != want {
				t.Errorf("slot(%s) = %d, want %d", key, got, want)
			}
		}
	}
}

// The shards' slots are spread evenly over the slot space, so that a
// cluster that splits the slots in equal ranges gets equal shares.
func TestShardsSpreadEvenly(t *testing.T) {
	for _, n := range []int{1, 3, 16, 64} {
		sh := newShards(n)
		for i, tag := range sh.tags {
			s := slotOf(tag)
			if lo, hi := i*16384/n, (i+1)*16384/n; s < lo || s >= hi {
				t.Errorf("n=%d: shard %d tag %s is in slot %d, want [%d,%d)", n, i, tag, s, lo, hi)
			}
		}
	}
}

func TestSlotOf(t *testing.T) {
	// Values from Redis's CLUSTER KEYSLOT.
	for key, want := range map[string]int{"foo": 12182, "{user1000}.following": 3443, "bar{}baz": 8190, "{}x": 10595} {
		if got := slotOf(key); got != want {
			t.Errorf("slotOf(%q) = %d, want %d", key, got, want)
		}
	}
}

package store

import "testing"

// The key names are part of the data format: changing one orphans stored
// operations. This test pins them.
func TestKeyNames(t *testing.T) {
	k := "op_abcdefghijklmnopqrstuvwxyz"
	tests := []struct{ got, want string }{
		{opKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:op"},
		{approvalsKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:approvals"},
		{deliveriesKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:deliveries"},
		{capsKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:caps"},
		{eventsKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:events"},
		{syncedKey(k), "cs:{op_abcdefghijklmnopqrstuvwxyz}:synced"},
		{leaseKey(k, "job:email:grace"), "cs:{op_abcdefghijklmnopqrstuvwxyz}:lease:job:email:grace"},
		{principalOpsKey("support-agent"), "cs:{principal:support-agent}:ops"},
		{idemKey("p", "k1"), "cs:idem:{50aaac5807fbe3f47eec09595bf6aaa9}"},
		{streamKey(), "cs:{queue}:stream"},
		{timersKey(), "cs:{queue}:timers"},
		{changesChannel, "cs:changes"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key = %q, want %q", tt.got, tt.want)
		}
	}
}

// All keys of one operation must hash to one Cluster slot.
func TestOperationKeysShareSlot(t *testing.T) {
	keys := opKeys("op_abcdefghijklmnopqrstuvwxyz")
	keys = append(keys, leaseKey("op_abcdefghijklmnopqrstuvwxyz", "x"))
	want := slot(keys[0])
	for _, k := range keys {
		if got := slot(k); got != want {
			t.Errorf("slot(%s) = %d, want %d", k, got, want)
		}
	}
	if slot(streamKey()) != slot(timersKey()) {
		t.Error("stream and timers must share a slot (fireScript touches both)")
	}
}

// slot is Redis Cluster's key slot: CRC16 of the hash tag, mod 16384.
func slot(key string) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

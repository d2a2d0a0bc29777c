package store

import (
	"errors"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Bulky fields (an operation's input, a stored preview) are kept
// compressed with zstd when that saves space: a pending operation's input
// is most of what it costs in Redis, and the text of an email or a
// message compresses to about 60 %. Only Go reads these fields (the
// scripts copy or delete them whole), so their form is this file's
// business. A compressed value starts with zstd's magic number, which no
// JSON document starts with, so values stored before, or left
// uncompressed because they did not shrink, read as they are.

const (
	packFrom  = 256     // smaller values are kept as they are
	packLimit = 8 << 20 // the most a stored value may inflate to
)

var zstdMagic = string([]byte{0x28, 0xb5, 0x2f, 0xfd})

var (
	codecOnce sync.Once
	encoder   *zstd.Encoder
	decoder   *zstd.Decoder
)

func codecs() {
	codecOnce.Do(func() {
		var err error
		// EncodeAll and DecodeAll are safe for concurrent use. The better
		// level is the first to entropy-code literals: text without
		// repeats (random tokens, base64) shrinks by a fifth instead of
		// not at all, for about 7 µs more per KiB; prose costs the same.
		encoder, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderCRC(false),
			zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<17))
		if err != nil {
			panic("store: zstd encoder: " + err.Error())
		}
		decoder, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(packLimit),
			zstd.WithDecoderMaxWindow(1<<22))
		if err != nil {
			panic("store: zstd decoder: " + err.Error())
		}
	})
}

// pack returns the stored form of a bulky value: compressed when that
// saves at least an eighth.
func pack(v string) string {
	if len(v) < packFrom {
		return v
	}
	codecs()
	c := encoder.EncodeAll([]byte(v), make([]byte, 0, len(v)/2))
	if len(c) > len(v)-len(v)/8 {
		return v
	}
	return string(c)
}

// unpack reads a value stored by pack.
func unpack(v string) (string, error) {
	if !strings.HasPrefix(v, zstdMagic) {
		return v, nil
	}
	codecs()
	out, err := decoder.DecodeAll([]byte(v), nil)
	if err != nil {
		return "", errors.Join(errors.New("compressed value is unreadable"), err)
	}
	return string(out), nil
}

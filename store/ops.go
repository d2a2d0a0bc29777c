package store

import (
	"context"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// storeOverhead is what an operation costs beyond its fields' bytes (keys,
// indexes, events and deliveries to come), counted against the principal's
// max_stored_bytes. The input counts as the agent sent it, before
// compression (compact.go): a quota then means the same whatever the text,
// and text made to compress well buys no more room.
const storeOverhead = 1024

// run executes an operation script with the shared KEYS and ARGV prefix.
func (r *Redis) run(ctx context.Context, s *redis.Script, ref approval.Ref, tx string, now time.Time, args ...any) *redis.Cmd {
	return r.runKeys(ctx, s, ref, nil, tx, now, args...)
}

// runKeys is run for a script that takes more KEYS after the shared ones
// (from 11 on): more builds them from the operation's shard tag, so that
// they share its slot.
func (r *Redis) runKeys(ctx context.Context, s *redis.Script, ref approval.Ref, more func(tag string) []string, tx string, now time.Time, args ...any) *redis.Cmd {
	tag := r.shards.of(ref.Principal)
	keys := opKeys(tag, ref.Principal, ref.Key)
	if more != nil {
		keys = append(keys, more(tag)...)
	}
	argv := append([]any{ref.Key, ref.Principal, tx, ms(now)}, args...)
	return r.runDurable(ctx, "transition", s, tag, keys, argv...)
}

// reply reads a script's {word, …} reply.
func reply(cmd *redis.Cmd) ([]string, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		}
	}
	return out, nil
}

// moved reads the reply of a script answering {word, status before} when it
// moved (before is fixed when the script has only one from-status) and
// {'status', current} when it did not.
func moved(ref approval.Ref, op string, res []string, err error, word string, before approval.Status) (approval.Status, bool, error) {
	if err != nil {
		return "", false, unavailable(op, err)
	}
	switch res[0] {
	case word, "done":
		if len(res) > 1 && res[1] != "" {
			before = approval.Status(res[1])
		}
		return before, true, nil
	case "status":
		return approval.Status(res[1]), false, nil
	}
	return "", false, notFound(ref.Key)
}

func jsonOrEmpty[T any](v *T) string {
	if v == nil {
		return ""
	}
	return mustJSON(v)
}

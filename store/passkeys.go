package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

var _ approval.PasskeyStore = (*Redis)(nil)

var (
	enrolScript   = redis.NewScript(lua("enrol"))
	passkeyScript = redis.NewScript(lua("passkey"))
)

// AddEnrolment stores a live enrolment link of approver for ttl.
func (r *Redis) AddEnrolment(ctx context.Context, approver, nonceHash string, ttl time.Duration) error {
	return unavailable("enrolment", r.rdb.Set(ctx, enrolKey(approver, nonceHash), "1", ttl).Err())
}

// Enrolment reports whether the enrolment link is live.
func (r *Redis) Enrolment(ctx context.Context, approver, nonceHash string) (bool, error) {
	n, err := r.rdb.Exists(ctx, enrolKey(approver, nonceHash)).Result()
	if err != nil {
		return false, unavailable("enrolment", err)
	}
	return n == 1, nil
}

// Enrol uses up the enrolment link and stores c, in one step. It returns
// false when the link is not live; a passkey enrolled already is
// invalid_state and leaves the link live.
func (r *Redis) Enrol(ctx context.Context, approver, nonceHash string, c approval.PasskeyCredential) (bool, error) {
	rec, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	id := base64.RawURLEncoding.EncodeToString(c.ID)
	n, err := enrolScript.Run(ctx, r.rdb, []string{enrolKey(approver, nonceHash), passkeysKey(approver)},
		id, string(rec), c.SignCount).Int()
	if err != nil {
		return false, unavailable("enrol", err)
	}
	if n < 0 {
		return false, approval.Errorf(approval.CodeInvalidState, "this passkey is enrolled already")
	}
	return n == 1, nil
}

// PasskeyCredentials lists approver's passkeys, oldest first, with their
// sign counts.
func (r *Redis) PasskeyCredentials(ctx context.Context, approver string) ([]approval.PasskeyCredential, error) {
	h, err := r.rdb.HGetAll(ctx, passkeysKey(approver)).Result()
	if err != nil {
		return nil, unavailable("passkeys", err)
	}
	var out []approval.PasskeyCredential
	for f, v := range h {
		id, ok := strings.CutPrefix(f, "c:")
		if !ok {
			continue
		}
		var c approval.PasskeyCredential
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return nil, &DecodeError{Key: "passkeys of " + approver, Field: f, Err: err}
		}
		n, _ := strconv.ParseUint(h["s:"+id], 10, 32)
		c.SignCount = uint32(n)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// UsePasskey moves the passkey's sign count to count if that is forward.
func (r *Redis) UsePasskey(ctx context.Context, approver string, credentialID []byte, count uint32) (approval.PasskeyResult, error) {
	res, err := passkeyScript.Run(ctx, r.rdb, []string{passkeysKey(approver)},
		base64.RawURLEncoding.EncodeToString(credentialID), count).Text()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", unavailable("passkey", err)
	}
	return approval.PasskeyResult(res), nil
}

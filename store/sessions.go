package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sign-in sessions of the inbox and console, and sign-ins under way, are
// kept in Redis so that every replica accepts them. Both are named by the
// SHA-256 of a secret the browser holds (the session cookie, the OIDC
// state), so the store holds nothing a browser could present.

// PutSession stores a session for ttl.
func (r *Redis) PutSession(ctx context.Context, idHash string, data []byte, ttl time.Duration) error {
	return unavailable("session", r.rdb.Set(ctx, sessionKey(idHash), data, ttl).Err())
}

// Session returns a live session, or nil.
func (r *Redis) Session(ctx context.Context, idHash string) ([]byte, error) {
	b, err := r.rdb.Get(ctx, sessionKey(idHash)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, unavailable("session", err)
}

// DropSession ends a session.
func (r *Redis) DropSession(ctx context.Context, idHash string) error {
	return unavailable("session", r.rdb.Del(ctx, sessionKey(idHash)).Err())
}

// PutSignIn stores a sign-in under way for ttl.
func (r *Redis) PutSignIn(ctx context.Context, stateHash string, data []byte, ttl time.Duration) error {
	return unavailable("sign-in", r.rdb.Set(ctx, signinKey(stateHash), data, ttl).Err())
}

// TakeSignIn returns a sign-in under way and forgets it (each state is
// used once), or nil.
func (r *Redis) TakeSignIn(ctx context.Context, stateHash string) ([]byte, error) {
	b, err := r.rdb.GetDel(ctx, signinKey(stateHash)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, unavailable("sign-in", err)
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisLogger sends go-redis's own messages (dial failures, reconnects)
// into the service's JSON log instead of a plain line on stderr.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// go-redis keeps one logger per process, read without locking: set it once.
var redisLogOnce sync.Once

func useRedisLogger(log *slog.Logger) {
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{log}) })
}

package main

import (
	"io"
	"log/slog"

	"github.com/countersign/countersign/internal/redact"
)

// newLogger is the one logger the service builds: JSON lines, with every
// record redacted (internal/redact), so that no log line can carry an
// approval link, whoever writes it. Everything that logs gets this logger
// (the store, the Redis client's own messages, the HTTP edge, workers).
func newLogger(w io.Writer) *slog.Logger {
	return redact.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"log"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// The limit handler is what a prepare cannot do without, on the same
// stack: a fiber server that checks the bearer key the way countersign
// does (SHA-256 of the key, looked up among the principals' hashes),
// decodes the JSON body into the same request shape, and makes one Redis
// script call that counts the request against the principal and keeps the
// request under a fresh key. Its rate is the ceiling of the architecture
// (fiber, one script round trip per request) on this machine; countersign
// is reported as a fraction of it.

// limitScript: KEYS 1 the principal's counter hash, 2 the new key;
// ARGV 1 the request's input, 2 its lifetime (ms). Returns the count.
var limitScript = redis.NewScript(`local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return n`)

var keyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// runLimitHandler serves until killed.
func runLimitHandler(listen, redisURL, keyHash string) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	principals := map[string]string{keyHash: "bench-agent"}
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ReadTimeout: 40 * time.Second, WriteTimeout: 40 * time.Second})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Post("/v1/operations", func(c *fiber.Ctx) error {
		key, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
		p := principals[hex.EncodeToString(sum[:])]
		if !ok || p == "" {
			return c.Status(401).JSON(fiber.Map{"error": fiber.Map{"code": "unauthenticated"}})
		}
		var req struct {
			Action         string          `json:"action"`
			Input          json.RawMessage `json:"input"`
			IdempotencyKey string          `json:"idempotency_key,omitempty"`
		}
		if err := json.Unmarshal(c.Body(), &req); err != nil || req.Action == "" || len(req.Input) == 0 {
			return c.Status(400).JSON(fiber.Map{"error": fiber.Map{"code": "invalid_input"}})
		}
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		op := "op_" + strings.ToLower(keyEncoding.EncodeToString(b))
		ctx, cancel := context.WithTimeout(c.UserContext(), 4*time.Second)
		defer cancel()
		if err := limitScript.Run(ctx, rdb, []string{"bench:limit:p:" + p, "bench:limit:o:" + op},
			[]byte(req.Input), 60000).Err(); err != nil {
			return c.Status(503).JSON(fiber.Map{"error": fiber.Map{"code": "unavailable"}})
		}
		return c.Status(201).JSON(fiber.Map{"operation_key": op, "action": req.Action, "status": "draft"})
	})
	log.Fatal(app.Listen(listen))
}

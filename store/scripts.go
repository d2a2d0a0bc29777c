package store

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// One Lua script per transition, in lua/: each checks the current status
// itself, so a transition is atomic and conditional, and each recognises
// its own retry by the transition id (go-redis re-sends a script whose
// reply came late; its second run must not read as someone else's win).
// Every script that changes an operation bumps its version, appends its
// audit event and publishes the key on changesChannel. The header of each
// file lists its KEYS, ARGV and return values.

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("store: missing script " + name)
	}
	return string(b)
}

// opScript is a script on one operation, with the shared prelude.
func opScript(name string) *redis.Script { return redis.NewScript(lua("prelude") + "\n" + lua(name)) }

var (
	createScript      = opScript("create")
	sendScript        = opScript("send")
	decideScript      = opScript("decide")
	claimScript       = opScript("claim")
	finishScript      = opScript("finish")
	settleScript      = opScript("settle")
	fenceScript       = opScript("fence")
	cancelScript      = opScript("cancel")
	expireScript      = opScript("expire")
	staleScript       = opScript("stale")
	capabilityScript  = opScript("capability")
	deliveredScript   = opScript("delivered")
	undeliveredScript = opScript("undelivered")
	syncedScript      = opScript("synced")
	undoneScript      = opScript("undone")
	escalateScript    = opScript("escalate")
	remindScript      = opScript("remind")
	supersedeScript   = opScript("supersede")
	revokeScript      = opScript("revoke")

	fireScript      = redis.NewScript(lua("fire"))
	sweepScript     = redis.NewScript(lua("sweep"))
	rateScript      = redis.NewScript(lua("rate"))
	readScript      = redis.NewScript(lua("read"))
	limitScript     = redis.NewScript(lua("limit"))
	advanceScript   = redis.NewScript(lua("advance"))
	allowanceScript = redis.NewScript(lua("allowance"))
)

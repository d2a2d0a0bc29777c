package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Durability is what a transition must reach before the store answers for
// it: before the agent hears "created", the approver "thank you", and
// before a claim lets an effect start (SPEC §2, guarantees 3 and 8).
//
// Redis replicates asynchronously: a master acknowledges a script before
// any replica has it, and a failover promotes a replica that may lack the
// last writes. A claim lost that way returns the operation to approved and
// lets it execute a second time; a decision lost that way makes a "thank
// you" false. So with Replicas > 0 every operation script is followed, on
// the same connection, by a probe write and WAIT Replicas Timeout: only
// when that many replicas acknowledge the write is the transition reported
// done. The probe makes WAIT cover a script that wrote nothing because it
// recognised its own earlier run (go-redis re-sends a script whose reply
// came late, perhaps on a new connection): WAIT counts only up to its own
// connection's last write, so without the probe it would report at once
// that a write made on another connection had reached the replicas.
//
// When fewer replicas acknowledge in time, the transition applied on the
// master and may or may not survive a failover: the caller gets 503
// unavailable with details.outcome_unknown (NotDurable). The executor asks
// again with the same claim token until the store answers (the script
// recognises its own win, and the probe and WAIT run again), and starts the
// effect only once the claim is durable.
//
// A single node with no replicas to wait for keeps an acknowledged
// transition across a crash only with AOF and appendfsync always (Redis
// 7.0 has no WAITAOF): with FsyncAlways set, a claim is refused (the
// operation stays approved) on a node that does not report both.
type Durability struct {
	// Replicas is how many replicas must acknowledge each transition; 0
	// waits for none.
	Replicas int
	// Timeout bounds each WAIT (default DefaultWaitTimeout).
	Timeout time.Duration
	// FsyncAlways refuses claims on a master that does not report AOF on
	// with appendfsync always (single node).
	FsyncAlways bool
}

// DefaultWaitTimeout is how long a transition waits for its replicas. A
// replica that is connected acknowledges within milliseconds; one that
// lags by more is treated as not having the write.
const DefaultWaitTimeout = 500 * time.Millisecond

// SetDurability is called once, before any transition.
func (r *Redis) SetDurability(d Durability) {
	if d.Timeout <= 0 {
		d.Timeout = DefaultWaitTimeout
	}
	r.dur = d
}

// Durability returns what transitions wait for.
func (r *Redis) Durability() Durability { return r.dur }

// NotDurable is a transition that applied on the master but was not
// acknowledged by enough replicas in time: it may or may not survive a
// failover. Agents see 503 unavailable with details.outcome_unknown.
type NotDurable struct {
	Op              string
	Acked, Required int64
	Refused         string // set when the store refused before running the script
}

func (e *NotDurable) Error() string {
	if e.Refused != "" {
		return "store: " + e.Op + ": refused: " + e.Refused
	}
	return fmt.Sprintf("store: %s: %d of %d replicas acknowledged in time; the change may or may not survive a failover", e.Op, e.Acked, e.Required)
}

// As lets errors.As(err, **approval.Error) see the coded error.
func (e *NotDurable) As(target any) bool {
	t, ok := target.(**approval.Error)
	if !ok {
		return false
	}
	if e.Refused != "" {
		// Nothing ran (or only a read): no outcome is unknown.
		msg := "the store cannot keep this change safe right now; try again shortly"
		if e.Op == "get" || e.Op == "read" {
			msg = "the store cannot confirm the operation's current state on its replicas right now; try again shortly"
		}
		*t = approval.Errorf(approval.CodeUnavailable, "%s", msg)
		return true
	}
	*t = approval.Errorf(approval.CodeUnavailable,
		"the store could not confirm that this change is safe on its replicas; it may or may not have been applied: read the operation before repeating the request").
		WithDetails(map[string]any{"outcome_unknown": true})
	return true
}

// node is the client of the master that holds tag's slot: a cluster
// routes a keyless WAIT to any node, so the script, the probe and WAIT go
// to the slot's master directly, on one connection.
func (r *Redis) node(ctx context.Context, tag string) (*redis.Client, error) {
	switch c := r.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, durableKey(tag))
	}
	return nil, fmt.Errorf("store: durability needs a redis.Client or redis.ClusterClient, not %T", r.rdb)
}

// evalDurable runs s on the master of tag's slot, then the probe write and
// WAIT on the same connection. The returned command carries NotDurable as
// its error when the replicas did not acknowledge in time, and the
// script's own error (or the transport's) otherwise.
func (r *Redis) evalDurable(ctx context.Context, op string, s *redis.Script, tag string, keys []string, args []any) *redis.Cmd {
	try := func(full bool) (*redis.Cmd, *redis.IntCmd, *redis.Cmd) {
		n, err := r.node(ctx, tag)
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd, nil, nil
		}
		// The pipeline reads every reply within the client's read
		// timeout: give WAIT its own time on top.
		n = n.WithTimeout(n.Options().ReadTimeout + r.dur.Timeout)
		pipe := n.Pipeline()
		var cmd *redis.Cmd
		if full {
			cmd = s.Eval(ctx, pipe, keys, args...)
		} else {
			cmd = s.EvalSha(ctx, pipe, keys, args...)
		}
		probe := pipe.Incr(ctx, durableKey(tag))
		wait := pipe.Do(ctx, "WAIT", r.dur.Replicas, r.dur.Timeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		return cmd, probe, wait
	}
	cmd, probe, wait := try(false)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		cmd, probe, wait = try(true)
	}
	if err := cmd.Err(); err != nil && isMoved(err) {
		// The slot moved (a resharding or failover in a cluster): the
		// script did not run. Read the slot map again and go once more.
		if c, ok := r.rdb.(*redis.ClusterClient); ok {
			c.ReloadState(ctx)
			cmd, probe, wait = try(true)
		}
	}
	if cmd.Err() != nil {
		return cmd
	}
	acked, werr := wait.Int64()
	werr = errors.Join(probe.Err(), werr)
	if werr != nil || acked < int64(r.dur.Replicas) {
		// The script ran on the master; whether it survives a failover
		// is not known.
		r.log.Warn("a transition was not acknowledged by enough replicas in time", "step", op,
			"acked", acked, "required", r.dur.Replicas, "err", werr)
		nd := &NotDurable{Op: op, Acked: acked, Required: int64(r.dur.Replicas)}
		if op == "read" {
			// A read counted against the rate changed nothing that matters.
			nd.Refused = "what it would show is not on enough replicas"
		}
		cmd.SetErr(nd)
	}
	return cmd
}

func isMoved(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "CLUSTERDOWN")
}

// runDurable is Script.Run that waits for the replicas when Durability
// asks for them.
func (r *Redis) runDurable(ctx context.Context, op string, s *redis.Script, tag string, keys []string, args ...any) *redis.Cmd {
	if r.dur.Replicas <= 0 {
		return s.Run(ctx, r.rdb, keys, args...)
	}
	return r.evalDurable(ctx, op, s, tag, keys, args)
}

// Topology is what the master reports about itself, read at start and
// before each claim.
type Topology struct {
	Role     string // "master" or "slave"
	Replicas int    // replicas connected and online
	// Epoch is the master's replication id: a failover gives the promoted
	// replica a new one, so a change says that the master changed.
	Epoch       string
	AOF         bool
	Fsync       string // appendfsync, "" when CONFIG is refused
	Unreported  bool   // the server does not report its replication (embedded, some managed services)
	RefusedConf bool   // CONFIG GET is refused (renamed or disabled)
}

// topology reads what n reports, in one round trip.
func topology(ctx context.Context, n *redis.Client) (Topology, error) {
	pipe := n.Pipeline()
	repl := pipe.Info(ctx, "replication")
	pers := pipe.Info(ctx, "persistence")
	conf := pipe.ConfigGet(ctx, "appendfsync")
	_, _ = pipe.Exec(ctx)
	var t Topology
	var re redis.Error
	if err := errors.Join(repl.Err(), pers.Err()); err != nil {
		if errors.As(err, &re) {
			return Topology{Unreported: true}, nil
		}
		return t, err
	}
	info := repl.Val()
	t.Role, t.Epoch = infoField(info, "role"), infoField(info, "master_replid")
	if t.Role == "" {
		return Topology{Unreported: true}, nil
	}
	for i := 0; ; i++ {
		v := infoField(info, "slave"+strconv.Itoa(i))
		if v == "" {
			break
		}
		if strings.Contains(v, "state=online") {
			t.Replicas++
		}
	}
	t.AOF = infoField(pers.Val(), "aof_enabled") == "1"
	if m, err := conf.Result(); err == nil {
		t.Fsync = m["appendfsync"]
	} else {
		t.RefusedConf = true
	}
	return t, nil
}

// guard refuses a claim on a master that cannot keep it through a
// failover or a crash: before the claim, so a refused operation stays
// approved and nothing is burned. It also notices a new master (epoch).
func (r *Redis) guard(ctx context.Context, tag string) error {
	if r.dur.Replicas <= 0 && !r.dur.FsyncAlways {
		return nil
	}
	n, err := r.node(ctx, tag)
	if err != nil {
		return unavailable("claim", err)
	}
	t, err := topology(ctx, n)
	if err != nil {
		return unavailable("claim", err)
	}
	r.observe(t)
	if reason := refusal(t, r.dur); reason != "" {
		r.log.Warn("refusing to claim: the store cannot keep the claim", "reason", reason)
		return &NotDurable{Op: "claim", Refused: reason}
	}
	return nil
}

// refusal says why t cannot keep a claim under d, or "".
func refusal(t Topology, d Durability) string {
	switch {
	case t.Unreported:
		return "" // checked (and warned about) at start
	case t.Role != "master":
		return "the store's node is not a master"
	case d.Replicas > 0 && t.Replicas < d.Replicas:
		return fmt.Sprintf("the master has %d replicas online; %d are required (COUNTERSIGN_REDIS_MIN_REPLICAS)", t.Replicas, d.Replicas)
	case d.Replicas == 0 && d.FsyncAlways && !t.RefusedConf && (!t.AOF || t.Fsync != "always"):
		return "a single Redis without appendonly yes and appendfsync always can lose a claim in a crash"
	}
	return ""
}

// observe records the master's epoch and logs a change.
func (r *Redis) observe(t Topology) {
	if t.Epoch == "" {
		return
	}
	r.epochMu.Lock()
	prev := r.epoch
	r.epoch = t.Epoch
	r.epochMu.Unlock()
	if prev != "" && prev != t.Epoch {
		r.log.Warn("the redis master changed (a failover or a restart); claims go on only where it keeps them", "replicas", t.Replicas)
	}
}

// Epoch is the replication id of the master last seen ("" before any).
func (r *Redis) Epoch() string {
	r.epochMu.Lock()
	defer r.epochMu.Unlock()
	return r.epoch
}

// ConfigureDurability decides Durability from the setting (COUNTERSIGN_REDIS_MIN_REPLICAS:
// "auto" or "" for auto, or a number) and what the master reports:
//
//   - a number N ≥ 1: wait for N replicas;
//   - 0: wait for none and require nothing (the operator accepts that a
//     crash or failover may lose the last transitions, and so execute
//     one twice); warned about;
//   - auto: 1 when the master has a replica online or is found through a
//     Sentinel (sentinel), else 0 with appendonly yes and appendfsync
//     always required: start is refused on a single node without them.
//
// It returns the warnings to log.
func (r *Redis) ConfigureDurability(ctx context.Context, setting string, timeout time.Duration, sentinel bool) (Durability, []string, error) {
	d := Durability{Timeout: timeout}
	var nodes []*redis.Client
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		}); err != nil {
			return d, nil, unavailable("durability", err)
		}
	case *redis.Client:
		nodes = []*redis.Client{c}
	}
	var tops []Topology
	for _, n := range nodes {
		t, err := topology(ctx, n)
		if err != nil {
			return d, nil, unavailable("durability", err)
		}
		tops = append(tops, t)
		r.observe(t)
	}
	var warnings []string
	switch s := strings.TrimSpace(strings.ToLower(setting)); s {
	case "", "auto":
		withReplicas, unreported := sentinel, false
		for _, t := range tops {
			withReplicas = withReplicas || t.Replicas > 0
			unreported = unreported || t.Unreported
		}
		if withReplicas {
			d.Replicas = 1
			break
		}
		if unreported {
			warnings = append(warnings, "redis does not report its replication and persistence: countersign cannot check that an acknowledged claim survives a crash; set COUNTERSIGN_REDIS_MIN_REPLICAS to the replicas to wait for, or 0 to accept the risk")
			break
		}
		d.FsyncAlways = true
		for i, t := range tops {
			if reason := refusal(t, d); reason != "" {
				return d, nil, fmt.Errorf("redis at %s: %s, so an operation could execute twice: set appendonly yes and appendfsync always, add a replica (then transitions wait for it), or set COUNTERSIGN_REDIS_MIN_REPLICAS=0 to accept the risk",
					nodes[i].Options().Addr, reason)
			}
		}
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 16 {
			return d, nil, fmt.Errorf("COUNTERSIGN_REDIS_MIN_REPLICAS must be auto or a number from 0 to 16, not %q", setting)
		}
		d.Replicas = n
		if n == 0 {
			warnings = append(warnings, "COUNTERSIGN_REDIS_MIN_REPLICAS=0: transitions are acknowledged before Redis has them on a replica or on disk; a failover or crash may lose them, and an operation claimed in that moment may execute twice")
		}
		for i, t := range tops {
			if n > 0 && !t.Unreported && t.Replicas < n {
				warnings = append(warnings, fmt.Sprintf("redis at %s has %d replicas online; transitions wait for %d, so they answer 503 until enough are back", nodes[i].Options().Addr, t.Replicas, n))
			}
		}
	}
	if timeout < 0 || timeout > 10*time.Second {
		return d, nil, fmt.Errorf("COUNTERSIGN_REDIS_WAIT_TIMEOUT must be between 1ms and 10s, not %s", timeout)
	}
	r.SetDurability(d)
	return r.dur, warnings, nil
}

// readyDurable is Ready's part for durability: a master with fewer
// replicas online than transitions wait for answers every transition 503,
// so the store is not ready.
func (r *Redis) readyDurable(ctx context.Context) error {
	if r.dur.Replicas <= 0 {
		return nil
	}
	var nodes []*redis.Client
	switch c := r.rdb.(type) {
	case *redis.Client:
		nodes = []*redis.Client{c}
	default:
		return nil // a cluster: each shard is checked by its own claims
	}
	for _, n := range nodes {
		t, err := topology(ctx, n)
		if err != nil {
			return unavailable("ready", err)
		}
		r.observe(t)
		if reason := refusal(t, r.dur); reason != "" {
			return errors.New("redis cannot keep transitions: " + reason)
		}
	}
	return nil
}

// readDurable runs the reads queue adds on the master of tag's slot and,
// where transitions wait for replicas, the probe write and WAIT after
// them on the same connection: what a read shows is then on the replicas
// too, so no failover can show an earlier status after it (SPEC §2). A
// node that is no longer a master (demoted by a failover, still holding
// old connections) refuses the probe: its reads are not shown.
func (r *Redis) readDurable(ctx context.Context, op, tag string, queue func(p redis.Pipeliner)) error {
	if r.dur.Replicas <= 0 {
		pipe := r.rdb.Pipeline()
		queue(pipe)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return unavailable(op, err)
		}
		return nil
	}
	n, err := r.node(ctx, tag)
	if err != nil {
		return unavailable(op, err)
	}
	pipe := n.WithTimeout(n.Options().ReadTimeout + r.dur.Timeout).Pipeline()
	queue(pipe)
	probe := pipe.Incr(ctx, durableKey(tag))
	wait := pipe.Do(ctx, "WAIT", r.dur.Replicas, r.dur.Timeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && probe.Err() == nil && wait.Err() == nil {
		return unavailable(op, err)
	}
	acked, werr := wait.Int64()
	if werr = errors.Join(probe.Err(), werr); werr != nil || acked < int64(r.dur.Replicas) {
		r.log.Warn("a read was not confirmed on enough replicas in time", "step", op, "acked", acked, "required", r.dur.Replicas, "err", werr)
		return &NotDurable{Op: op, Acked: acked, Required: int64(r.dur.Replicas), Refused: "what it would show is not on enough replicas"}
	}
	return nil
}

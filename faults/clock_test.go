//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// remindAfter is the reminder of the items route in TestReplicaClockOffset:
// shorter than the offsets, so that a replica whose clock ran ahead, or
// a send on one whose clock was behind, would fire it at once, and longer
// than a short run, so that none is due in it.
const remindAfter = 80 * time.Second

// orderSlack is how far out of order two audit times may be: each replica
// reads Redis's time to within half a round trip (under a millisecond on
// loopback; more on a loaded machine).
const orderSlack = 50 * time.Millisecond

// TestReplicaClockOffset: one replica's own clock 90 s ahead, another's
// 90 s behind (COUNTERSIGN_FAULTS_CLOCK_OFFSET, through the clock the
// service takes), under the driver's load. Besides the suite's
// invariants: no replica reports an operation expired before its window
// (or a draft's TTL) has passed (the short run's windows are all 1 h;
// long runs add 1-minute windows that the driver waits out), no reminder
// fires before it is due (80 s after the send), and every audit time lies
// within the run and in order (issue 20, item 3). Without the Redis clock
// it fails: audit times 90 s outside the run and out of order, and
// reminders fired at the send.
func TestReplicaClockOffset(t *testing.T) {
	c := startCluster(t, clusterOpts{clockOffsets: []time.Duration{0, 90 * time.Second, -90 * time.Second}, remind: remindAfter.String()})
	name := "replica clocks 90 s ahead and behind"
	sz := sized(8, 120*time.Millisecond, 60*time.Millisecond)
	t.Logf("%s: seed %d (COUNTERSIGN_FAULTS_SEED replays it)", name, seed())
	start := time.Now()
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), sz.run+sz.settle+5*time.Minute)
	defer cancel()
	rn.drive(ctx, sz.run, sz.ops, sz.workers, sz.pace, 40*time.Second)
	res := rn.settle(ctx, name, sz.settle)
	end := time.Now()

	type view struct {
		Status    string    `json:"status"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	type events struct {
		Events []struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
		} `json:"events"`
	}
	early, earlyReminders, outside, unordered, checked, reminders := 0, 0, 0, 0, 0, 0
	for _, o := range rn.ops {
		if o.key == "" {
			continue
		}
		checked++
		for _, rep := range c.replicas {
			st, b, _ := rn.call(ctx, "GET", rep.url+"/v1/operations/"+o.key, agentKey, "", "")
			if st != 200 {
				continue // counted by the suite's own checks
			}
			var v view
			_ = json.Unmarshal(b, &v)
			if v.Status == "expired" && time.Now().Before(v.ExpiresAt) {
				early++
				t.Logf("op %s: replica %d says expired, its window ends %s", o.key, rep.i, v.ExpiresAt)
			}
		}
		st, b, _ := rn.call(ctx, "GET", c.replicas[0].url+"/v1/operations/"+o.key+"/events", agentKey, "", "")
		if st != 200 {
			continue
		}
		var evs events
		_ = json.Unmarshal(b, &evs)
		var sent time.Time
		for i, e := range evs.Events {
			if e.Time.Before(start.Add(-2*time.Second)) || e.Time.After(end.Add(2*time.Second)) {
				outside++
				t.Logf("op %s: event %s at %s, outside the run (%s to %s)", o.key, e.Event, e.Time, start, end)
			}
			// Replicas read Redis's time each to within half a round trip of
			// their last measurement: events written by two replicas a
			// moment apart may be that far out of order, no more.
			if i > 0 && e.Time.Before(evs.Events[i-1].Time.Add(-orderSlack)) {
				unordered++
				t.Logf("op %s: event %s at %s, %s before the one before it", o.key, e.Event, e.Time, evs.Events[i-1].Time.Sub(e.Time))
			}
			switch e.Event {
			case "sent":
				sent = e.Time
			case "reminded":
				reminders++
				// The recorded times come from the clock under test, so also
				// judge by the real one: in a run shorter than the reminder's
				// delay, no reminder is due at all.
				if end.Sub(start) < remindAfter || (!sent.IsZero() && e.Time.Sub(sent) < remindAfter-time.Second) {
					earlyReminders++
					t.Logf("op %s: reminded %s after the send; due after %s", o.key, e.Time.Sub(sent), remindAfter)
				}
			}
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("clocks: %d operations read through each replica: %d reported expired before their end, %d reminders (%d before due), %d audit times outside the run, %d out of order",
		checked, early, reminders, earlyReminders, outside, unordered))
	record(res)
	res.check(t)
	if early+earlyReminders+outside+unordered > 0 || checked == 0 {
		t.Errorf("with replica clocks off by ±90 s: %d early expiries, %d early reminders, %d audit times outside the run, %d out of order (%d operations checked)",
			early, earlyReminders, outside, unordered, checked)
	}
}

//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is one scenario's line of the table.
type result struct {
	Name       string
	Attempted  int // operations the driver began to prepare
	Acked      int // answered 201/200 with an operation key
	Found      int // acknowledged and readable at the end
	Executed   int // operations whose write reached the target
	Duplicates int // operations written more than once, or written without a claim
	Lost       int // acknowledged and gone
	Unsurfaced int // approved, not executed, and not surfaced as stuck (or succeeded without a write)
	Changed    int // terminal states that changed afterwards
	Backwards  int // operations seen in a status earlier than one seen before
	Untrue     int // decisions answered "Thank you" that the operation does not show at the end
	Stuck      int // executing at the end, listed by the admin API's stuck view
	StuckWrote int // of those, the write had reached the target
	Slow       int // requests answered after more than 5 s
	MaxLatency time.Duration
	Notes      []string
}

var (
	resultsMu sync.Mutex
	results   []*result
)

func record(r *result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

// fail marks the test failed for every broken invariant of r.
func (r *result) check(t *testing.T) {
	t.Helper()
	t.Logf("%s: %s", r.Name, r.line())
	for _, n := range r.Notes {
		t.Logf("%s: %s", r.Name, n)
	}
	if r.Duplicates != 0 || r.Lost != 0 || r.Unsurfaced != 0 || r.Changed != 0 || r.Backwards != 0 || r.Untrue != 0 {
		t.Errorf("%s: %d duplicates, %d lost, %d approved but neither executed nor surfaced, %d terminal states changed, %d went back, %d thanked decisions not kept",
			r.Name, r.Duplicates, r.Lost, r.Unsurfaced, r.Changed, r.Backwards, r.Untrue)
	}
	if r.Acked == 0 {
		t.Errorf("%s: no operation was acknowledged: the scenario proved nothing", r.Name)
	}
}

func (r *result) line() string {
	return fmt.Sprintf("attempted %d, acknowledged %d, found %d, executed %d, duplicates %d, lost %d, unsurfaced %d, terminal changed %d, went back %d, thanked not kept %d, stuck %d (%d written), >5 s answers %d, slowest %s",
		r.Attempted, r.Acked, r.Found, r.Executed, r.Duplicates, r.Lost, r.Unsurfaced, r.Changed, r.Backwards, r.Untrue, r.Stuck, r.StuckWrote, r.Slow, r.MaxLatency.Round(time.Millisecond))
}

// settle waits until no acknowledged operation is still approved and the
// set of executing ones stopped changing, at most d; then checks every
// acknowledged operation against the invariants.
func (rn *run) settle(ctx context.Context, name string, d time.Duration) *result {
	res := &result{Name: name}
	deadline := time.Now().Add(d)
	var final map[string]string
	lastExec, stableSince := "", time.Now()
	for {
		final = rn.statuses(ctx)
		approved, executing := 0, []string{}
		for k, s := range final {
			switch s {
			case "approved":
				approved++
			case "executing":
				executing = append(executing, k)
			}
		}
		sort.Strings(executing)
		ex := strings.Join(executing, ",")
		if ex != lastExec {
			lastExec, stableSince = ex, time.Now()
		}
		if approved == 0 && time.Since(stableSince) > 2*time.Second || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	stuck := rn.stuck(ctx)
	hist := map[string]int{}
	for _, s := range final {
		hist[s]++
	}
	res.Notes = append(res.Notes, fmt.Sprintf("final states: %v; %d mails received", hist, len(rn.c.smtp.Messages())))
	if os.Getenv("COUNTERSIGN_FAULTS_DEBUG") != "" && len(rn.c.smtp.Messages()) > 0 {
		m := rn.c.smtp.Messages()[0]
		p, _ := m.Parse()
		res.Notes = append(res.Notes, fmt.Sprintf("first mail to %v: %s", m.To, p.Text))
	}
	for _, o := range rn.ops {
		if !o.started {
			continue
		}
		res.Attempted++
		writes := rn.c.target.writesTo(o.path)
		if writes > 0 {
			res.Executed++
		}
		if writes > 1 {
			res.Duplicates++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): %d writes", o.i, o.key, writes))
		}
		if o.noMail && o.key != "" {
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): an approval mail did not arrive in time", o.i, o.key))
		}
		if o.key == "" {
			if writes > 0 {
				res.Duplicates++
				res.Notes = append(res.Notes, fmt.Sprintf("op %d: written but never acknowledged", o.i))
			}
			continue
		}
		res.Acked++
		s, ok := final[o.key]
		if !ok || s == "" {
			res.Lost++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): acknowledged, now not found", o.i, o.key))
			continue
		}
		res.Found++
		o.sawStatus(s)
		if len(o.back) > 0 {
			res.Backwards++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): went back: %s", o.i, o.key, strings.Join(o.back, ", ")))
		}
		if bad := untrue(o, s); bad != "" {
			res.Untrue++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): %s", o.i, o.key, bad))
		}
		if o.fate == expireFirst && s != "expired" {
			res.Changed++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): its window passed before anyone approved, yet it is %s", o.i, o.key, s))
		}
		if o.terminal != "" && s != o.terminal {
			res.Changed++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): was %s, now %s", o.i, o.key, o.terminal, s))
		}
		switch s {
		case "approved":
			res.Unsurfaced++
			res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): still approved, not executed", o.i, o.key))
		case "executing":
			if stuck[o.key] {
				res.Stuck++
				if writes > 0 {
					res.StuckWrote++
				}
			} else {
				res.Unsurfaced++
				res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): executing, not in the stuck list", o.i, o.key))
			}
		case "succeeded":
			if writes == 0 {
				res.Unsurfaced++
				res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): succeeded without a write", o.i, o.key))
			}
		case "failed":
		default:
			if writes > 0 {
				res.Duplicates++
				res.Notes = append(res.Notes, fmt.Sprintf("op %d (%s): written, but %s", o.i, o.key, s))
			}
		}
	}
	res.Slow, res.MaxLatency = int(rn.slow.Load()), time.Duration(rn.maxLat.Load())
	if e := rn.errs.Load(); e > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d requests got no answer at all (connection refused or reset)", e))
	}
	if res.Stuck > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d operations left executing for an operator (%d of them written)", res.Stuck, res.StuckWrote))
	}
	return res
}

// untrue says how the final status s of o contradicts a decision a page
// answered "Thank you" to, or "".
func untrue(o *opRec, s string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.thanked["grace"] == "reject" || o.thanked["ada"] == "reject" {
		if s != "rejected" {
			return "a rejection was answered Thank you, yet it is " + s
		}
		return ""
	}
	if o.fate == approve && o.thanked["grace"] == "approve" && o.thanked["ada"] == "approve" && rankOf(s) < rankOf("approved") {
		return "both approvals were answered Thank you, yet it is " + s
	}
	return ""
}

// statuses reads every acknowledged operation's status as the agent sees
// it; a 404 is "" (gone).
func (rn *run) statuses(ctx context.Context) map[string]string {
	out := map[string]string{}
	var mu sync.Mutex
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				for attempt := 0; ; attempt++ {
					st, b, _ := rn.call(ctx, "GET", rn.c.live()[0].url+"/v1/operations/"+k, agentKey, "", "")
					if st == 200 {
						var v opView
						_ = json.Unmarshal(b, &v)
						mu.Lock()
						out[k] = v.Status
						mu.Unlock()
						break
					}
					if st == 404 {
						mu.Lock()
						out[k] = ""
						mu.Unlock()
						break
					}
					if attempt > 50 || ctx.Err() != nil {
						mu.Lock()
						out[k] = "unreadable"
						mu.Unlock()
						break
					}
					sleep(ctx, 200*time.Millisecond)
				}
			}
		}()
	}
	for _, o := range rn.ops {
		if o.key != "" {
			keys <- o.key
		}
	}
	close(keys)
	wg.Wait()
	return out
}

// stuck returns the operations the admin API lists as stuck executing.
func (rn *run) stuck(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		st, b, _ := rn.call(ctx, "GET", rn.c.live()[0].url+"/v1/admin/operations?stuck=true&older_than_seconds=1&limit=1000", operatorKey, "", "")
		if st == 200 {
			var v struct {
				Operations []opView `json:"operations"`
			}
			_ = json.Unmarshal(b, &v)
			for _, o := range v.Operations {
				out[o.Key] = true
			}
			return out
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return out
}

// printTable writes the table of every scenario that ran, in Markdown.
func printTable(w io.Writer) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	fmt.Fprintln(w, "| scenario | attempted | acknowledged | found after | executed | duplicates | lost | unsurfaced | terminal changed | went back | thanked, not kept | left stuck (written) | answers > 5 s | slowest answer |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d (%d) | %d | %s |\n", r.Name, r.Attempted, r.Acked, r.Found, r.Executed,
			r.Duplicates, r.Lost, r.Unsurfaced, r.Changed, r.Backwards, r.Untrue, r.Stuck, r.StuckWrote, r.Slow, r.MaxLatency.Round(10*time.Millisecond))
	}
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s: %s\n", r.Name, n)
		}
	}
}

func writeTable() {
	p := os.Getenv("COUNTERSIGN_FAULTS_TABLE")
	if p == "" {
		return
	}
	f, err := os.Create(p)
	if err != nil {
		return
	}
	defer f.Close()
	printTable(f)
}

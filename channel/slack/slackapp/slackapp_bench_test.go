package slackapp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// BenchmarkClickToAck measures the click-to-ack latency of
// POST /slack/interactions: a correctly signed Approve click on a pending
// operation, sent over a real TCP connection, until the 200 arrives. Each
// click is a real decision (signature check, replay check, DecideAs on
// Redis, wake-up); the workers run meanwhile, delivering and executing
// the approved operations against the fake Slack. It reports the p50,
// p99 and max of b.N clicks; run with at least 200:
//
//	go test -run '^$' -bench ClickToAck -benchtime 400x ./channel/slack/slackapp
//	REDIS_URL=redis://127.0.0.1:6379/12 go test -run '^$' -bench ClickToAck -benchtime 400x ./channel/slack/slackapp
func BenchmarkClickToAck(b *testing.B) {
	e := newEnv(b, opts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = e.app.Listener(ln) }()
	b.Cleanup(func() { _ = e.app.Shutdown() })
	target := "http://" + ln.Addr().String() + "/slack/interactions"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	// One pending operation per click, prepared before the clock starts
	// (by an agent whose quotas allow that many).
	e.agent.Quotas = approval.Quotas{MaxDrafts: 1e6, MaxPending: 1e6, RequestsPerMinute: 1e7, SendsPerMinute: 1e6}
	ch := e.fake.ChannelID("#approvals")
	bodies := make([][]byte, b.N)
	for i := range b.N {
		op := e.prepareSend(b, fmt.Sprint("message ", i))
		v, _ := json.Marshal(notifyslack.ButtonValue{Operation: op.Key, PayloadHash: op.PayloadHash})
		bodies[i] = fakeslack.FormBody(fakeslack.BlockActions(fakeslack.Click{UserID: grace, TeamID: "T0FAKE",
			ActionID: "approve", BlockID: notifyslack.BlockIDPrefix + op.Key, Value: string(v),
			ChannelID: ch, MessageTS: "1700000000.000100"}))
	}
	// Let the workers deliver every approval message first, so the clicks
	// meet the steady state of a service, not a burst of 4×N notifications.
	e.fake.Wait(b, 5*time.Minute, "all approval messages", func() bool {
		return len(e.fake.Messages(ch)) >= b.N
	})
	time.Sleep(200 * time.Millisecond)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		req := fakeslack.SignedRequest(target, secret, time.Now(), bodies[i])
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat[i] = time.Since(start)
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	if b.N >= 200 {
		b.Logf("%d signed clicks: p50 %s, p99 %s, max %s", b.N, pct(0.50), pct(0.99), lat[len(lat)-1])
	}
	// Every click counted.
	for i := range min(b.N, 5) {
		var c struct {
			Actions []struct {
				Value string `json:"value"`
			} `json:"actions"`
		}
		_ = json.Unmarshal([]byte(mustPayload(bodies[i])), &c)
		var v notifyslack.ButtonValue
		_ = json.Unmarshal([]byte(c.Actions[0].Value), &v)
		if op := e.get(b, v.Operation); len(op.Approvals) != 1 {
			b.Fatalf("click %d not counted: %s", i, op.Status)
		}
	}
}

func mustPayload(form []byte) string {
	v, _ := url.ParseQuery(string(form))
	return v.Get("payload")
}

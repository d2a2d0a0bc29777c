package teamsapp_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

// BenchmarkClickToAck measures the click-to-ack latency of
// POST /teams/messages: an Approve click (an invoke activity with a real
// RS256 Bot Framework token) on a pending operation, sent over a real TCP
// connection, until the invoke response (the clicking user's refreshed
// card) arrives. Each click is a real decision: token verification
// (keys already read), replay check, DecideAs on Redis, the card rendered
// for the answer; the workers run meanwhile, executing the approved
// operations (email.send to an in-process SMTP server) and editing the
// cards on the fake Bot Connector. It reports the p50, p99 and max of b.N
// clicks; run with at least 200:
//
//	go test -run '^$' -bench ClickToAck -benchtime 400x ./channel/teams/teamsapp
//	REDIS_URL=redis://127.0.0.1:6379/13 go test -run '^$' -bench ClickToAck -benchtime 400x ./channel/teams/teamsapp
func BenchmarkClickToAck(b *testing.B) {
	e := newEnv(b, opts{notify: []string{"teams:19:bench@thread.tacv2"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = e.app.Listener(ln) }()
	b.Cleanup(func() { _ = e.app.Shutdown() })
	url := "http://" + ln.Addr().String() + "/teams/messages"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	// One pending operation per click, its card posted, before the clock
	// starts; the first request reads the Bot Framework's keys.
	e.agent.Quotas = approval.Quotas{MaxDrafts: 1e6, MaxPending: 1e6, RequestsPerMinute: 1e7, SendsPerMinute: 1e6}
	keys := make([]string, b.N)
	for i := range b.N {
		keys[i] = e.prepareSend(b, "Bench", strings.Repeat("line\n", i%20+1)).Key
	}
	e.fake.Wait(b, 5*time.Minute, "all approval cards", func() bool { return len(e.fake.Activities()) >= b.N })
	cards := e.fake.Activities()
	reqs := make([]*http.Request, b.N)
	bodies := make([][]byte, b.N)
	for i, key := range keys {
		j := slices.IndexFunc(cards, func(a faketeams.Activity) bool {
			x := faketeams.FindAction(&a.Card, "reject")
			return x != nil && x.Data.Operation == key
		})
		if j < 0 {
			b.Fatalf("no card for %s", key)
		}
		reqs[i] = e.fake.Invoke(url, e.fake.ClickOn(cards[j], "approve", grace, ""), faketeams.Sign{})
		bodies[i], _ = io.ReadAll(reqs[i].Body)
	}
	warm := e.fake.Invoke(url, e.fake.ClickOn(cards[0], "approve", stranger, ""), faketeams.Sign{})
	if resp, err := client.Do(warm); err != nil || resp.StatusCode != 200 {
		b.Fatalf("warm-up: %v %v", resp, err)
	}
	time.Sleep(200 * time.Millisecond)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		req := reqs[i]
		req.Body = io.NopCloser(bytes.NewReader(bodies[i]))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		r := faketeams.ReadResponse(resp)
		resp.Body.Close()
		lat[i] = time.Since(start)
		if r.HTTPStatus != 200 || !strings.Contains(faketeams.Text(r.Card), "Your approval was recorded") {
			b.Fatalf("click %d: HTTP %d %.300s", i, r.HTTPStatus, r.Raw)
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
	for _, key := range keys[:min(b.N, 5)] {
		if op := e.get(b, key); len(op.Approvals) != 1 {
			b.Fatalf("click on %s not counted: %s", key, op.Status)
		}
	}
}

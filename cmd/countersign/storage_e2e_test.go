package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/store"
)

// Issue 10: the service as serve builds it (its actions wrapped for
// metrics and tracing) stores an email's operation without a second copy
// of the message in its preview, and still shows the same preview. A
// decorator that hid the action's Previewer once doubled what every
// pending operation cost.
func TestStoredOperationKeepsNoRenderablePreview(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	st, body := srv.call(t, "POST", "/v1/operations", srv.APIKey, emailBody)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, body)
	}
	var prepared struct {
		Key     string          `json:"operation_key"`
		Preview json.RawMessage `json:"preview"`
	}
	must(t, json.Unmarshal(body, &prepared))

	rdb, err := store.Open(srv.RedisURL)
	must(t, err)
	defer rdb.Close()
	ctx := context.Background()
	keys, _, err := rdb.Scan(ctx, 0, "cs:*:o:"+prepared.Key, 1000).Result()
	must(t, err)
	if len(keys) != 1 {
		t.Fatalf("operation hash: %v", keys)
	}
	fields, err := rdb.HKeys(ctx, keys[0]).Result()
	must(t, err)
	has := map[string]bool{}
	for _, f := range fields {
		has[f] = true
	}
	if !has["in"] || has["pv"] {
		t.Errorf("stored fields %v: want the input and no preview (email.send renders it again)", fields)
	}

	_, body = srv.call(t, "GET", "/v1/operations/"+prepared.Key, srv.APIKey, "")
	var read struct {
		Preview json.RawMessage `json:"preview"`
	}
	must(t, json.Unmarshal(body, &read))
	if len(read.Preview) < 20 || string(read.Preview) != string(prepared.Preview) {
		t.Errorf("preview read back %s\nwant the one prepare returned %s", read.Preview, prepared.Preview)
	}
}

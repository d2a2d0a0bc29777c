package editorder_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/editorder"
)

func msg(st approval.Status, approvals int) approval.Message {
	return approval.Message{Status: st, Approvals: make([]approval.DecisionView, approvals)}
}

func TestEditsNeverGoBack(t *testing.T) {
	e := editorder.New(nil)
	var shown []approval.Status
	edit := func(m approval.Message) func() error {
		return func() error { shown = append(shown, m.Status); return nil }
	}
	steps := []struct {
		m    approval.Message
		sent bool
	}{
		{msg(approval.StatusPending, 1), true},
		{msg(approval.StatusApproved, 1), true},
		{msg(approval.StatusPending, 1), false},  // an older read
		{msg(approval.StatusExecuting, 1), true}, // shows as approved: same rank, sent again
		{msg(approval.StatusSucceeded, 1), true},
		{msg(approval.StatusApproved, 1), false},
		{msg(approval.StatusSucceeded, 1), true}, // a retry of the same state
	}
	for i, s := range steps {
		before := len(shown)
		if err := e.Apply("C1|1.0", s.m, edit(s.m)); err != nil {
			t.Fatal(err)
		}
		if sent := len(shown) > before; sent != s.sent {
			t.Fatalf("step %d (%s): sent %v, want %v", i, s.m.Status, sent, s.sent)
		}
	}
	// A failed edit does not count as shown; another message is on its own.
	if err := e.Apply("C1|2.0", msg(approval.StatusSucceeded, 1), func() error { return errors.New("down") }); err == nil {
		t.Fatal("the edit's error was lost")
	}
	if err := e.Apply("C1|2.0", msg(approval.StatusApproved, 1), edit(msg(approval.StatusApproved, 1))); err != nil || shown[len(shown)-1] != approval.StatusApproved {
		t.Fatalf("after a failed edit: %v %v", err, shown)
	}
}

// A slow edit of an older state holds the message: the later state waits
// for it and lands last.
func TestEditsOfOneMessageRunOneAtATime(t *testing.T) {
	e := editorder.New(nil)
	var mu sync.Mutex
	var landed []approval.Status
	slow := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = e.Apply("k", msg(approval.StatusApproved, 1), func() error {
			close(slow)
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			landed = append(landed, approval.StatusApproved)
			mu.Unlock()
			return nil
		})
	}()
	<-slow
	_ = e.Apply("k", msg(approval.StatusSucceeded, 1), func() error {
		mu.Lock()
		landed = append(landed, approval.StatusSucceeded)
		mu.Unlock()
		return nil
	})
	wg.Wait()
	if len(landed) != 2 || landed[1] != approval.StatusSucceeded {
		t.Fatalf("landed %v", landed)
	}
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// heldAuth is a Slack auth.test that fails until the context ends, then
// holds the call until the test releases it: the learner cannot return
// before that, so a stop that returns earlier did not wait for it.
type heldAuth struct {
	calls     chan struct{}
	cancelled chan struct{}
	release   chan struct{}
	once      sync.Once
}

func (a *heldAuth) AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error) {
	select {
	case a.calls <- struct{}{}:
	default:
	}
	<-ctx.Done()
	a.once.Do(func() { close(a.cancelled) })
	<-a.release
	return nil, errors.New("auth.test: cut off")
}

type noTeam struct{}

func (noTeam) SetTeam(string, string) {}

// Slack's goroutines (the workspace learner and the Socket Mode reader)
// belong to startSlack's stop, which Main.Close calls: stop returns only
// once both have returned.
func TestSlackGoroutinesStopWithTheirOwner(t *testing.T) {
	auth := &heldAuth{calls: make(chan struct{}, 1), cancelled: make(chan struct{}), release: make(chan struct{})}
	socketCancelled, socketRelease := make(chan struct{}), make(chan struct{})
	socket := func(ctx context.Context) {
		<-ctx.Done()
		close(socketCancelled)
		<-socketRelease
	}
	stop := startSlack(context.Background(), auth, noTeam{}, socket, slog.New(slog.DiscardHandler))
	<-auth.calls
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	<-auth.cancelled
	<-socketCancelled
	held := func(what string) {
		t.Helper()
		select {
		case <-stopped:
			t.Fatalf("stop returned while %s still ran", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	held("the workspace learner and the socket reader")
	close(auth.release)
	held("the socket reader")
	close(socketRelease)
	<-stopped
}

// The learner retries on a timer and ends with its context, even while it
// waits to retry.
func TestLearnWorkspaceEndsWhileWaitingToRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		learnWorkspace(ctx, failingAuth{calls}, noTeam{}, slog.New(slog.DiscardHandler))
	}()
	<-calls // failed once: now waiting a second to retry
	cancel()
	<-done
}

type failingAuth struct{ calls chan struct{} }

func (a failingAuth) AuthTestContext(context.Context) (*slack.AuthTestResponse, error) {
	select {
	case a.calls <- struct{}{}:
	default:
	}
	return nil, errors.New("auth.test: unreachable")
}

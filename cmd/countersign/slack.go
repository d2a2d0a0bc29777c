package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/web"
	"github.com/slack-go/slack"
)

// slackEffects wires Slack when SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET
// (or SLACK_APP_TOKEN) are set: the "slack" channel (approval messages in
// channels and DMs, edited as operations move on), the slack.post_message
// action with its undo slack.delete_message, and the buttons' clicks: over
// POST /slack/interactions (signed with the signing secret) and, with an
// app-level token, over Socket Mode (no public URL needed).
// COUNTERSIGN_SLACK_API_URL points the Web API elsewhere (tests use a
// fake). Routes that notify slack without the credentials fail the start
// rather than drop notifications.
func (m *Main) slackEffects(e *effects, file *config.File, dev bool) error {
	token, secret, appToken := m.get("SLACK_BOT_TOKEN", ""), m.get("SLACK_SIGNING_SECRET", ""), m.get("SLACK_APP_TOKEN", "")
	if token == "" || (secret == "" && appToken == "") {
		switch {
		case token != "":
			return errors.New("SLACK_BOT_TOKEN is set but SLACK_SIGNING_SECRET is not: set both to enable Slack (or SLACK_APP_TOKEN for Socket Mode)")
		case secret != "":
			return errors.New("SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not: set both to enable Slack")
		case appToken != "":
			return errors.New("SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not: Socket Mode needs both")
		case slices.Contains(file.Channels(), "slack"):
			return errors.New("routes notify slack, but SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or SLACK_APP_TOKEN) are not set (see docs/slack.md)")
		}
		return nil
	}
	if appToken != "" && !strings.HasPrefix(appToken, "xapp-") {
		return errors.New("SLACK_APP_TOKEN must be an app-level token (xapp-…) with the connections:write scope")
	}
	apiURL, err := slackAPIURL(m.get("COUNTERSIGN_SLACK_API_URL", slack.APIURL))
	if err != nil {
		return err
	}
	log := m.log.With("component", "slack")
	opts := []slack.Option{slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(&http.Client{Timeout: 15 * time.Second})}
	if appToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(appToken))
	}
	client := slack.New(token, opts...)

	e.notifiers["slack"] = notifyslack.New(notifyslack.Config{Client: client, Logger: log})
	cfg := slackpost.Config{Client: client, Logger: log}
	e.actions = append(e.actions, slackpost.New(cfg), slackpost.NewDelete(cfg))

	ctx, cancel := context.WithCancel(context.Background())
	e.close = append(e.close, func() error { cancel(); return nil })
	e.extra = append(e.extra, func(svc *approval.Service, m *Main) []web.Mount {
		h, err := slackapp.New(slackapp.Config{Service: svc, SigningSecret: secret, Client: client,
			Replays: m.Store, Logger: log})
		if err != nil {
			log.Error("slack interactions are off", "err", err)
			return nil
		}
		var socket func(context.Context)
		if appToken != "" {
			socket = func(ctx context.Context) { h.RunSocket(ctx, slackapp.NewSocketClient(client, log)) }
			log.Info("slack: socket mode on: interactions arrive over the socket")
		}
		stop := startSlack(ctx, client, h, socket, log)
		m.closers = append(m.closers, func() error { stop(); h.Close(); return nil })
		if secret == "" {
			return nil // Socket Mode only: no public endpoint
		}
		return []web.Mount{{Method: http.MethodPost, Path: "/slack/interactions", Handler: h.Handle}}
	})
	return nil
}

// slackAPIURL checks the Web API base URL and gives it the trailing slash
// slack-go appends method names to.
func slackAPIURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("COUNTERSIGN_SLACK_API_URL must be an absolute http(s) URL without credentials, such as %s", slack.APIURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// startSlack starts Slack's goroutines: the workspace learner and, with
// Socket Mode, the socket reader (socket, nil without it). The returned
// stop ends both and returns once they have; Main.Close calls it.
func startSlack(ctx context.Context, client authTester, h teamSetter, socket func(context.Context), log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if socket != nil {
		wg.Go(func() { socket(ctx) })
	}
	wg.Go(func() { learnWorkspace(ctx, client, h, log) })
	return func() { cancel(); wg.Wait() }
}

// authTester is slack.Client's auth.test.
type authTester interface {
	AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error)
}

// teamSetter is told the workspace (slackapp.Handler).
type teamSetter interface {
	SetTeam(teamID, enterpriseID string)
}

// learnWorkspace asks Slack which workspace the token belongs to, so that
// only that workspace's users' clicks count. It checks the token at start
// too, and keeps trying (with backoff, on a timer) while Slack is
// unreachable, until ctx ends. Until it succeeds, clicks are checked by
// signature and user id only.
func learnWorkspace(ctx context.Context, client authTester, h teamSetter, log *slog.Logger) {
	wait := time.Second
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := client.AuthTestContext(cctx)
		cancel()
		if err == nil {
			h.SetTeam(r.TeamID, r.EnterpriseID)
			log.Info("slack connected", "team", r.Team, "team_id", r.TeamID, "bot_user", r.UserID)
			return
		}
		if ctx.Err() != nil {
			return
		}
		e, _ := notifyslack.Classify("auth.test", err)
		log.Error("slack: cannot check the bot token; will retry", "err", e, "retry_in", wait)
		retry := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			retry.Stop()
			return
		case <-retry.C:
		}
		wait = min(wait*2, 5*time.Minute)
	}
}

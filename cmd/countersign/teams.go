package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	notifyteams "github.com/countersign/countersign/channel/teams"
	"github.com/countersign/countersign/channel/teams/teamsapp"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/web"
)

// teamsEffects wires Microsoft Teams when TEAMS_APP_ID and
// TEAMS_APP_PASSWORD are set: the "teams" channel (approval cards in each
// approver's 1:1 chat and in channels, edited as operations move on) and
// POST /teams/messages for the cards' buttons. TEAMS_TENANT_ID is the
// bot's tenant (a single-tenant bot logs in there, and only that
// organization's users' clicks count). COUNTERSIGN_TEAMS_API_URL,
// COUNTERSIGN_TEAMS_LOGIN_URL and COUNTERSIGN_TEAMS_OPENID_URL point the
// Bot Framework endpoints elsewhere (tests use a fake). Routes that notify
// teams without the credentials fail the start rather than drop
// notifications.
func (m *Main) teamsEffects(e *effects, file *config.File, dev bool) error {
	id, password, tenant := m.get("TEAMS_APP_ID", ""), m.get("TEAMS_APP_PASSWORD", ""), m.get("TEAMS_TENANT_ID", "")
	if id == "" || password == "" {
		switch {
		case id != "":
			return errors.New("TEAMS_APP_ID is set but TEAMS_APP_PASSWORD is not: set both to enable Microsoft Teams")
		case password != "":
			return errors.New("TEAMS_APP_PASSWORD is set but TEAMS_APP_ID is not: set both to enable Microsoft Teams")
		case slices.Contains(file.Channels(), "teams"):
			return errors.New("routes notify teams, but TEAMS_APP_ID and TEAMS_APP_PASSWORD are not set (see docs/teams.md)")
		}
		return nil
	}
	if strings.ContainsAny(tenant, "/?#% ") {
		return errors.New("TEAMS_TENANT_ID must be the tenant's id (a GUID) or its domain")
	}
	log := m.log.With("component", "teams")
	conn, err := notifyteams.NewConnector(notifyteams.ConnectorConfig{
		ServiceURL: m.get("COUNTERSIGN_TEAMS_API_URL", ""), LoginURL: m.get("COUNTERSIGN_TEAMS_LOGIN_URL", ""),
		AppID: id, Password: password, TenantID: tenant,
	})
	if err != nil {
		return err
	}
	verifier, err := teamsapp.NewVerifier(teamsapp.VerifierConfig{OpenIDURL: m.get("COUNTERSIGN_TEAMS_OPENID_URL", ""), AppID: id})
	if err != nil {
		return err
	}
	e.notifiers["teams"] = notifyteams.New(notifyteams.Config{Connector: conn, Logger: log})
	e.extra = append(e.extra, func(svc *approval.Service, m *Main) []web.Mount {
		h, err := teamsapp.New(teamsapp.Config{Service: svc, Verifier: verifier, Replays: m.Store, TenantID: tenant, Logger: log})
		if err != nil {
			log.Error("teams interactions are off", "err", err)
			return nil
		}
		// Read the Bot Framework's keys now, so the first click does not
		// wait for them; a click reads them anyway if this fails.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := verifier.Warm(ctx); err != nil {
				log.Warn("teams: cannot read the Bot Framework's keys yet; the first click will try again", "err", err)
			}
		}()
		m.closers = append(m.closers, func() error { cancel(); wg.Wait(); return nil })
		return []web.Mount{{Method: http.MethodPost, Path: "/teams/messages", Handler: h.Handle}}
	})
	log.Info("microsoft teams enabled", "app_id", id, "tenant", tenant)
	return nil
}

package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/channel/teams/teamscard"
)

// Defaults of the Bot Framework endpoints (COUNTERSIGN_TEAMS_API_URL and
// COUNTERSIGN_TEAMS_LOGIN_URL override them; tests point them at fakes).
const (
	DefaultServiceURL = "https://smba.trafficmanager.net/teams/"
	DefaultLoginURL   = "https://login.microsoftonline.com/"
	// multiTenant is the login tenant of a multi-tenant bot.
	multiTenant = "botframework.com"
	scope       = "https://api.botframework.com/.default"
)

// ConnectorConfig builds a Connector.
type ConnectorConfig struct {
	// ServiceURL is the Bot Connector base URL (DefaultServiceURL).
	ServiceURL string
	// LoginURL is the Entra ID login base URL (DefaultLoginURL); the token
	// comes from {LoginURL}{tenant}/oauth2/v2.0/token.
	LoginURL string
	// AppID and Password are the bot's credentials (TEAMS_APP_ID,
	// TEAMS_APP_PASSWORD); TenantID its tenant (TEAMS_TENANT_ID), empty
	// for a multi-tenant bot.
	AppID, Password, TenantID string
	HTTP                      *http.Client
	Now                       func() time.Time
}

// Connector is a client of the Bot Framework REST API: a token from the
// login endpoint (client credentials), then conversations and activities
// on the Bot Connector. Its errors never carry the password or a token.
type Connector struct {
	cfg      ConnectorConfig
	service  string
	tokenURL string

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewConnector checks cfg.
func NewConnector(cfg ConnectorConfig) (*Connector, error) {
	if cfg.AppID == "" || cfg.Password == "" {
		return nil, errors.New("teams: TEAMS_APP_ID and TEAMS_APP_PASSWORD are required")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	service, err := baseURL(cfg.ServiceURL, DefaultServiceURL, "COUNTERSIGN_TEAMS_API_URL")
	if err != nil {
		return nil, err
	}
	login, err := baseURL(cfg.LoginURL, DefaultLoginURL, "COUNTERSIGN_TEAMS_LOGIN_URL")
	if err != nil {
		return nil, err
	}
	tenant := cfg.TenantID
	if tenant == "" {
		tenant = multiTenant
	}
	return &Connector{cfg: cfg, service: service, tokenURL: login + url.PathEscape(tenant) + "/oauth2/v2.0/token"}, nil
}

// baseURL checks an endpoint's base URL and gives it a trailing slash.
func baseURL(raw, def, name string) (string, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return "", fmt.Errorf("%s must be an absolute http(s) URL without credentials or query, such as %s", name, def)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// AppID is the bot's application id.
func (c *Connector) AppID() string { return c.cfg.AppID }

// TenantID is the bot's tenant ("" for a multi-tenant bot).
func (c *Connector) TenantID() string { return c.cfg.TenantID }

// Account is a member of a conversation.
type Account struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	AADObjectID string `json:"aadObjectId,omitempty"`
}

// Activity is a message the bot sends.
type Activity struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	// Summary is what notifications show instead of the card.
	Summary     string                 `json:"summary,omitempty"`
	Attachments []teamscard.Attachment `json:"attachments,omitempty"`
}

// ConversationParameters create a conversation: a 1:1 chat with one
// member, or a new post in a channel (IsGroup, channel in ChannelData,
// with its first activity).
type ConversationParameters struct {
	IsGroup     bool      `json:"isGroup"`
	Bot         *Account  `json:"bot,omitempty"`
	Members     []Account `json:"members,omitempty"`
	TenantID    string    `json:"tenantId,omitempty"`
	Activity    *Activity `json:"activity,omitempty"`
	ChannelData any       `json:"channelData,omitempty"`
}

// ConversationResource is a created conversation (and its first activity).
type ConversationResource struct {
	ID         string `json:"id"`
	ActivityID string `json:"activityId,omitempty"`
}

// CreateConversation is POST /v3/conversations. For a 1:1 chat it
// returns the existing conversation with that member, if any.
func (c *Connector) CreateConversation(ctx context.Context, p ConversationParameters) (ConversationResource, error) {
	var r ConversationResource
	err := c.call(ctx, "create conversation", http.MethodPost, "v3/conversations", p, &r)
	if err == nil && r.ID == "" {
		err = errors.New("teams: create conversation: the answer has no conversation id")
	}
	return r, err
}

// SendActivity posts a to a conversation and returns its id.
func (c *Connector) SendActivity(ctx context.Context, conversation string, a Activity) (string, error) {
	var r struct {
		ID string `json:"id"`
	}
	err := c.call(ctx, "send activity", http.MethodPost, "v3/conversations/"+url.PathEscape(conversation)+"/activities", a, &r)
	if err == nil && r.ID == "" {
		err = errors.New("teams: send activity: the answer has no activity id")
	}
	return r.ID, err
}

// UpdateActivity replaces an activity the bot sent (a card edited in place).
func (c *Connector) UpdateActivity(ctx context.Context, conversation, id string, a Activity) error {
	a.ID = id
	return c.call(ctx, "update activity", http.MethodPut,
		"v3/conversations/"+url.PathEscape(conversation)+"/activities/"+url.PathEscape(id), a, nil)
}

// APIError is a failed call: what it was, the HTTP status, the error code
// the service gave, and how long it asked to wait.
type APIError struct {
	Op         string
	Status     int
	Code       string
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("teams: %s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	return s
}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

func (c *Connector) call(ctx context.Context, op, method, path string, in, out any) error {
	token, err := c.Token(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("teams: %s: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.service+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("teams: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("teams: %s: %w", op, unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 != 2 {
		if resp.StatusCode == http.StatusUnauthorized {
			c.forget(token) // revoked or expired early: the retry logs in again
		}
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return &APIError{Op: op, Status: resp.StatusCode, Code: safeCode(e.Error.Code), RetryAfter: retryAfter(resp.Header)}
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("teams: %s: the answer is not JSON", op)
	}
	return nil
}

// Token returns a Bot Connector access token, from the login endpoint
// when the cached one is missing or within five minutes of expiry.
func (c *Connector) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if c.token != "" && now.Before(c.expires.Add(-5*time.Minute)) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {c.cfg.AppID},
		"client_secret": {c.cfg.Password}, "scope": {scope}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("teams: login: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("teams: login: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	var t struct {
		AccessToken string      `json:"access_token"`
		ExpiresIn   json.Number `json:"expires_in"`
		Error       string      `json:"error"`
	}
	_ = json.Unmarshal(raw, &t)
	if resp.StatusCode != http.StatusOK || t.AccessToken == "" {
		return "", &APIError{Op: "login", Status: resp.StatusCode, Code: safeCode(t.Error), RetryAfter: retryAfter(resp.Header)}
	}
	secs, err := t.ExpiresIn.Int64()
	if err != nil || secs <= 0 {
		secs = 3600
	}
	c.token, c.expires = t.AccessToken, now.Add(time.Duration(secs)*time.Second)
	return c.token, nil
}

// forget drops a token the connector refused.
func (c *Connector) forget(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(min(s, 3600)) * time.Second
	}
	return 0
}

// safeCode keeps an error code fit for logs: short, no spaces.
func safeCode(s string) string {
	if len(s) > 64 || strings.ContainsAny(s, " \t\r\n\"") {
		return ""
	}
	return s
}

// unwrapURL drops the request URL from a transport error (it names no
// secret, but it is noise).
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

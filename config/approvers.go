package config

import (
	"strings"
	"time"
)

// ApproverSpec is a human.
type ApproverSpec struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name"`
	Email       string `yaml:"email"`
	SlackUserID string `yaml:"slack_user_id"`
	// TeamsUserID is the person in Microsoft Teams: their Teams user id
	// ("29:…", as the bot sees it) or their Entra object id (a GUID).
	TeamsUserID string   `yaml:"teams_user_id"`
	Groups      []string `yaml:"groups"`
	// TimeZone (IANA, e.g. Europe/Berlin) shows this approver times in
	// their own zone beside UTC on the approval page.
	TimeZone string `yaml:"time_zone"`
	// OIDCSubject names this approver at inbox sign-in when oidc.claim is
	// not email.
	OIDCSubject string `yaml:"oidc_subject"`
}

// validateApprovers checks the approvers and returns their ids and groups.
func (f *File) validateApprovers(bad func(string, ...any)) (approvers, groups map[string]bool) {
	approvers, groups = map[string]bool{}, map[string]bool{}
	for i, a := range f.Approvers {
		uniqueID(bad, "approvers", i, a.ID, approvers)
		for _, g := range a.Groups {
			groups[g] = true
		}
		if a.TimeZone != "" {
			if _, err := time.LoadLocation(a.TimeZone); err != nil || a.TimeZone == "Local" {
				bad("approvers[%d] %s: time_zone %q is not an IANA time zone such as Europe/Berlin", i, a.ID, a.TimeZone)
			}
		}
		if a.Email != "" && !strings.Contains(a.Email, "@") {
			bad("approvers[%d] %s: email %q is not an address", i, a.ID, a.Email)
		}
		if a.TeamsUserID != "" && !teamsUserID.MatchString(a.TeamsUserID) {
			bad("approvers[%d] %s: teams_user_id %q must be a Teams user id (29:…) or an Entra object id (a GUID)", i, a.ID, a.TeamsUserID)
		}
	}
	return approvers, groups
}

package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/countersign/countersign/approval"
)

// Enroll sends approver a single-use passkey enrolment link through their
// channels (POST /v1/admin/approvers/{id}/enroll). The link goes to the
// approver only; the result says where. Returns not_found, invalid_state.
func (a *Admin) Enroll(ctx context.Context, approver string) (approval.EnrolResult, error) {
	var out approval.EnrolResult
	_, err := a.c.do(ctx, http.MethodPost, "/v1/admin/approvers/"+url.PathEscape(approver)+"/enroll", nil, nil, 0, &out)
	return out, err
}

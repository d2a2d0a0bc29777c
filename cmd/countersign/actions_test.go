package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

type stubNamedAction struct{ name string }

func (a stubNamedAction) Name() string { return a.name }
func (stubNamedAction) Prepare(context.Context, approval.PrepareRequest) (*approval.Prepared, error) {
	return nil, nil
}
func (stubNamedAction) Execute(context.Context, *approval.Operation) (json.RawMessage, error) {
	return nil, nil
}

// The wiring refuses an action the registry does not list.
func TestWiredActionsAreRegistered(t *testing.T) {
	a, err := httpreq.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := registered([]approval.Action{a}); err != nil {
		t.Errorf("http.request: %v", err)
	}
	err = registered([]approval.Action{a, stubNamedAction{"made.up"}})
	if err == nil || !strings.Contains(err.Error(), "made.up is wired but not registered") {
		t.Errorf("unregistered action: %v", err)
	}
}

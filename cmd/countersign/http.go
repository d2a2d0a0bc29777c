package main

import (
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/config"
)

// httpEffects wires http.request and its targets. Target headers are
// resolved from the environment here, once; a missing variable fails the
// start with the header's and the variable's names, never a value.
func (m *Main) httpEffects(e *effects, file *config.File, dev bool) error {
	if len(file.Targets) == 0 {
		return nil
	}
	targets, err := httpTargets(file, m.Env)
	if err != nil {
		return err
	}
	a, err := httpreq.New(targets)
	if err != nil {
		return err
	}
	e.actions = append(e.actions, a)
	e.close = append(e.close, func() error { a.Close(); return nil })
	return nil
}

// httpTargets turns the targets of the policy file into the action's.
func httpTargets(file *config.File, env func(string) (string, bool)) ([]httpreq.Target, error) {
	var out []httpreq.Target
	for _, t := range file.Targets {
		headers, err := t.ResolveHeaders(env)
		if err != nil {
			return nil, err
		}
		ht := httpreq.Target{
			Name: t.Name, BaseURL: t.BaseURL, Headers: headers, StateFields: t.State.Fields, NoRead: !t.Reads(),
			AllowPrivate: t.Private(), Timeout: time.Duration(t.Timeout), MaxBodyBytes: t.MaxBodyBytes,
		}
		if t.Retry != nil {
			ht.Retry = &httpreq.Retry{On: t.Retry.On, Max: t.Retry.Max}
		}
		for _, a := range t.Allow {
			ht.Allow = append(ht.Allow, httpreq.Rule{Method: a.Method, Path: a.Path, Query: a.Query})
		}
		out = append(out, ht)
	}
	return out, nil
}

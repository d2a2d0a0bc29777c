package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// taskParams are the params of the task methods.
type taskParams struct {
	TaskID string  `json:"taskId"`
	Cursor *string `json:"cursor"`
}

// taskMethod answers tasks/get, tasks/result, tasks/list, tasks/cancel
// and tasks/update from the caller's operations.
func (t *taskLayer) taskMethod(ctx context.Context, b Backend, fl flavor, m rpcMsg) (any, *rpcErr) {
	var tp taskParams
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &tp) != nil {
		return nil, &rpcErr{Code: rpcInvalidParams, Message: "params must be an object"}
	}
	if m.Method == "tasks/list" {
		if fl == flavorExtension {
			return nil, &rpcErr{Code: rpcMethodNotFound, Message: "tasks/list is not part of the tasks extension"}
		}
		if tp.Cursor != nil && *tp.Cursor != "" {
			return nil, &rpcErr{Code: rpcInvalidParams, Message: "invalid cursor: the list has one page"}
		}
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		defer cancel()
		views, err := b.List(cctx, "")
		if err != nil {
			return nil, backendErr(err)
		}
		tasks := []wireTask{}
		for _, v := range views {
			if v.Status != approval.StatusDraft {
				tasks = append(tasks, t.task(v, fl, false))
			}
		}
		return map[string]any{"tasks": tasks}, nil
	}
	if m.Method == "tasks/result" && fl == flavorExtension {
		return nil, &rpcErr{Code: rpcMethodNotFound, Message: "tasks/result is not part of the tasks extension: tasks/get carries the result"}
	}
	if m.Method == "tasks/update" && fl != flavorExtension {
		return nil, &rpcErr{Code: rpcMethodNotFound, Message: "method not found: tasks/update"}
	}
	v, rerr := t.lookup(ctx, b, tp.TaskID)
	if rerr != nil {
		return nil, rerr
	}
	switch m.Method {
	case "tasks/get":
		out := t.task(v, fl, true)
		if fl == flavorExtension {
			out.ResultType = "complete"
		}
		return out, nil
	case "tasks/update": // no task of ours ever asks for input: an ack
		return map[string]any{"resultType": "complete"}, nil
	case "tasks/result":
		deadline := time.Now().Add(taskResultLimit)
		for !v.Status.Terminal() {
			if time.Now().After(deadline) {
				return nil, &rpcErr{Code: rpcInternal, Message: "the task has not finished yet; poll tasks/get"}
			}
			began := time.Now()
			var err error
			if v, err = b.Get(ctx, v.OperationKey, MaxWaitSeconds*time.Second); err != nil {
				return nil, backendErr(err)
			}
			if !v.Status.Terminal() && time.Since(began) < time.Second {
				// The long-poll came back at once (the service is closing):
				// do not spin.
				select {
				case <-ctx.Done():
					return nil, &rpcErr{Code: rpcInternal, Message: "the task has not finished yet; poll tasks/get"}
				case <-time.After(taskPollInterval):
				}
			}
		}
		return json.RawMessage(finalResult(v, v.OperationKey)), nil
	case "tasks/cancel":
		if fl == flavorExperimental && v.Status.Terminal() {
			return nil, &rpcErr{Code: rpcInvalidParams, Message: "the task has already ended (" + taskStatus(v.Status, fl) + "): it cannot be cancelled"}
		}
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		defer cancel()
		nv, err := b.Cancel(cctx, v.OperationKey)
		if fl == flavorExtension {
			// Cooperative: an ack, whatever the operation could still do.
			if err != nil && approval.ErrorCode(err) != approval.CodeInvalidState {
				return nil, backendErr(err)
			}
			return map[string]any{"resultType": "complete"}, nil
		}
		if err != nil {
			if approval.ErrorCode(err) == approval.CodeInvalidState {
				return nil, &rpcErr{Code: rpcInvalidParams, Message: "the task cannot be cancelled now: a human has approved it and countersign is carrying it out"}
			}
			return nil, backendErr(err)
		}
		return t.task(nv, fl, false), nil
	}
	return nil, &rpcErr{Code: rpcMethodNotFound, Message: "method not found: " + m.Method}
}

// lookup reads the task's operation: the caller's own, sent.
func (t *taskLayer) lookup(ctx context.Context, b Backend, id string) (approval.View, *rpcErr) {
	if id == "" {
		return approval.View{}, &rpcErr{Code: rpcInvalidParams, Message: "taskId is required"}
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	v, err := b.Get(cctx, id, 0)
	if err != nil {
		return approval.View{}, backendErr(err)
	}
	if v.Status == approval.StatusDraft {
		return approval.View{}, &rpcErr{Code: rpcInvalidParams, Message: "Failed to retrieve task: Task not found (the operation was never sent)"}
	}
	return v, nil
}

// backendErr turns a backend error into a JSON-RPC error: a task that is
// not the caller's is not found; foreign errors say nothing of themselves.
func backendErr(err error) *rpcErr {
	var e *approval.Error
	if !errors.As(err, &e) {
		return &rpcErr{Code: rpcInternal, Message: "internal error"}
	}
	switch e.Code {
	case approval.CodeNotFound, approval.CodeInvalidInput:
		return &rpcErr{Code: rpcInvalidParams, Message: "Failed to retrieve task: Task not found"}
	}
	return &rpcErr{Code: rpcInternal, Message: strings.TrimSpace(errorText(e)), Data: ErrorContent{Error: e}}
}

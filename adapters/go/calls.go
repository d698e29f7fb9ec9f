package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// replyMsg is the host's answer to one call.
type replyMsg struct {
	result json.RawMessage
	err    error
}

// HostCall asks the host for a service on behalf of the task, such as
// "agent.call", and returns the reply's result. The method must be declared
// with WithCalls. A reply error is returned as an *Error (for instance
// "permission_denied" or "cycle_detected"); when ctx ends first, the call is
// cancelled and ctx's error returned. The call's deadline is ctx's. The
// call carries the task's TraceParent, or the one ContextWithTraceParent put
// in ctx, so the host parents the call's span on it.
func (t *Task) HostCall(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return t.s.hostCall(ctx, t, method, params)
}

// CallAgent runs action on another agent through the host ("agent.call")
// and returns the reply's result: the sub-task's AgentOutput as JSON, with
// the value in "data". The sub-task inherits this task's trace and
// remaining deadline.
func (t *Task) CallAgent(ctx context.Context, agent, action string, params any) (json.RawMessage, error) {
	if params == nil {
		params = map[string]any{}
	}
	return t.HostCall(ctx, "agent.call", map[string]any{"agent": agent, "action": action, "params": params})
}

func (s *session) hostCall(ctx context.Context, t *Task, method string, params any) (json.RawMessage, error) {
	if !slices.Contains(s.a.calls, method) {
		return nil, Errorf(CodePermissionDenied, "host call %q is not declared; add agent.WithCalls(%q)", method, method)
	}
	if params == nil {
		params = map[string]any{}
	}
	raw, err := marshalValue(params)
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "params of %s: %v", method, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "params of %s must be a JSON object", method)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("a-%d", s.callSeq.Add(1))
	ch := make(chan replyMsg, 1)
	s.mu.Lock()
	if s.linkClosed {
		s.mu.Unlock()
		return nil, Errorf(CodeCancelled, "host call %s: the host link is closed", method)
	}
	s.calls[id] = ch
	s.mu.Unlock()

	var deadlineMS int64
	if dl, ok := ctx.Deadline(); ok {
		deadlineMS = max(1, time.Until(dl).Milliseconds())
	}
	frame := callFrame{Type: "call", ID: id, Method: method, Params: raw, TaskID: t.ID, DeadlineMS: deadlineMS}
	frame.TraceParent, frame.TraceState = callTraceContext(ctx, t)
	if err := s.w.send(frame); err != nil {
		s.dropCall(id)
		var tl *tooLargeError
		if errors.As(err, &tl) {
			return nil, NewError(CodeFrameTooLarge, err)
		}
		return nil, Errorf(CodeInternal, "host call %s: %v", method, err)
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		if s.dropCall(id) {
			_ = s.w.send(cancelFrame{Type: "cancel", ID: id, Reason: context.Cause(ctx).Error()})
		}
		return nil, ctx.Err()
	}
}

// dropCall forgets a pending call; it reports whether it was pending.
func (s *session) dropCall(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.calls[id]
	delete(s.calls, id)
	return ok
}

// onReply delivers a reply frame to its waiting call.
func (s *session) onReply(f rawFrame) {
	id := f.str("id")
	s.mu.Lock()
	ch, ok := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if !ok {
		s.warn("dropped a reply with an unknown id %q", id)
		return
	}
	switch f.str("status") {
	case "ok":
		res := f.raw("result")
		if res == nil {
			res = json.RawMessage("null")
		}
		ch <- replyMsg{result: res}
	default:
		var body errorBody
		if raw := f.raw("error"); raw == nil || json.Unmarshal(raw, &body) != nil {
			body = errorBody{Code: CodeInternal, Message: "reply without a readable error"}
		}
		ch <- replyMsg{err: body.toError()}
	}
}

// failCall fails one pending call (an oversized reply) with err.
func (s *session) failCall(id string, err error) bool {
	s.mu.Lock()
	ch, ok := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if ok {
		ch <- replyMsg{err: err}
	}
	return ok
}

// failAllCalls fails every pending call; the link is gone.
func (s *session) failAllCalls(err error) {
	s.mu.Lock()
	calls := s.calls
	s.calls = map[string]chan replyMsg{}
	s.mu.Unlock()
	for _, ch := range calls {
		ch <- replyMsg{err: err}
	}
}

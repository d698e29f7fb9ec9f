package agent

import (
	"context"
	"encoding/json"
)

// Host call methods of the gateway, to pass to WithCalls; the deployment
// grants them (calls = ["ctx.*", "msg.*", "net.fetch"] in agent.toml).
var (
	// CtxCalls are the session context and stream calls.
	CtxCalls = []string{"ctx.get", "ctx.put", "ctx.patch", "ctx.remove", "ctx.emit", "ctx.reply"}
	// MsgCalls are the messaging calls.
	MsgCalls = []string{"msg.send", "msg.publish", "msg.receive", "msg.subscribe", "msg.unsubscribe"}
	// NetCalls are the egress calls.
	NetCalls = []string{"net.fetch"}
)

// CodeVersionConflict is the code of a context write that named a version
// that is no longer current; nothing was changed. Check it with
// IsVersionConflict or CodeOf(err) == CodeVersionConflict.
const CodeVersionConflict = "version_conflict"

// IsVersionConflict reports whether err is a context write's version conflict.
func IsVersionConflict(err error) bool { return CodeOf(err) == CodeVersionConflict }

// Snapshot is the session's context (or some keys of it) at a version.
type Snapshot struct {
	Context map[string]any `json:"context"`
	Version int64          `json:"version"`
}

// Change is the result of a context write.
type Change struct {
	Version int64    `json:"version"`
	Keys    []string `json:"keys"`
	Changed bool     `json:"changed"`
}

// Session is the gateway session a task runs for: its context, custom
// events and reply chunks. Get one with SessionOf.
type Session struct {
	t *Task
	// ID is the session's id ("" when the task runs for none).
	ID string
}

// SessionOf returns the session of the task (the task must run for one: a
// turn, or a message about one).
func SessionOf(t *Task) *Session { return &Session{t: t, ID: t.SessionID} }

// WriteOption qualifies a context write.
type WriteOption func(map[string]any)

// ExpectVersion makes a write compare-and-set: it fails with
// CodeVersionConflict unless the context is at version v.
func ExpectVersion(v int64) WriteOption {
	return func(p map[string]any) { p["expected_version"] = v }
}

// Get returns the context, or only keys of it, and its version ("ctx.get").
func (s *Session) Get(ctx context.Context, keys ...string) (*Snapshot, error) {
	if keys == nil {
		keys = []string{}
	}
	var snap Snapshot
	if err := callInto(ctx, s.t, "ctx.get", map[string]any{"keys": keys}, &snap); err != nil {
		return nil, err
	}
	if snap.Context == nil {
		snap.Context = map[string]any{}
	}
	return &snap, nil
}

// Put sets one top-level key ("ctx.put").
func (s *Session) Put(ctx context.Context, key string, value any, opts ...WriteOption) (*Change, error) {
	return s.write(ctx, "ctx.put", map[string]any{"key": key, "value": value}, opts)
}

// Update sets several top-level keys at once ("ctx.put" with values).
func (s *Session) Update(ctx context.Context, values map[string]any, opts ...WriteOption) (*Change, error) {
	return s.write(ctx, "ctx.put", map[string]any{"values": values}, opts)
}

// Patch applies a JSON merge patch (RFC 7386: objects merge, null removes)
// ("ctx.patch").
func (s *Session) Patch(ctx context.Context, patch map[string]any, opts ...WriteOption) (*Change, error) {
	return s.write(ctx, "ctx.patch", map[string]any{"patch": patch}, opts)
}

// Remove removes top-level keys ("ctx.remove").
func (s *Session) Remove(ctx context.Context, keys []string, opts ...WriteOption) (*Change, error) {
	if keys == nil {
		keys = []string{}
	}
	return s.write(ctx, "ctx.remove", map[string]any{"keys": keys}, opts)
}

// Emit sends a custom event to the session's client ("ctx.emit") and
// returns its sequence.
func (s *Session) Emit(ctx context.Context, eventType string, data any) (int64, error) {
	var r struct {
		Sequence int64 `json:"sequence"`
	}
	err := callInto(ctx, s.t, "ctx.emit", map[string]any{"type": eventType, "data": data}, &r)
	return r.Sequence, err
}

// ReplyChunk streams a piece of the reply now ("ctx.reply"); the task's
// result is the final reply. It returns the event's sequence.
func (s *Session) ReplyChunk(ctx context.Context, text string, data any) (int64, error) {
	var r struct {
		Sequence int64 `json:"sequence"`
	}
	err := callInto(ctx, s.t, "ctx.reply", map[string]any{"text": text, "data": data}, &r)
	return r.Sequence, err
}

func (s *Session) write(ctx context.Context, method string, params map[string]any, opts []WriteOption) (*Change, error) {
	for _, o := range opts {
		o(params)
	}
	var c Change
	if err := callInto(ctx, s.t, method, params, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// callInto makes a host call and decodes its result into out (when not nil).
func callInto(ctx context.Context, t *Task, method string, params any, out any) error {
	raw, err := t.HostCall(ctx, method, params)
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return Errorf(CodeInternal, "reply of %s: %v", method, err)
	}
	return nil
}

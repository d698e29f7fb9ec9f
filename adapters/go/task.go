package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Task is one run of an action, as the host asked for it.
type Task struct {
	// ID is the host's id of this request ("h-<n>"); results, progress and
	// host calls refer to it.
	ID string
	// Action is the action's name.
	Action string
	// Params is the action's params, a JSON object ({} when none came).
	Params json.RawMessage
	// Attempt counts runs of this task, from 1.
	Attempt int
	// Deadline is when the host gives up on the task; zero means none.
	Deadline time.Time
	// Trace places the task in its tree of tasks.
	Trace Trace
	// TraceParent is the W3C traceparent of the host's span for this task,
	// "" when the task is not traced (or the host sent a malformed one).
	// Host calls made for the task carry it unless their context says
	// otherwise (ContextWithTraceParent).
	TraceParent string
	// TraceState is the W3C tracestate that came with TraceParent, if any.
	TraceState string
	// TaskID is the public task id the client sees.
	TaskID string
	// SessionID is the gateway session the task runs for, if any.
	SessionID string
	// Budget holds budget fields such as "max_cost", if any.
	Budget json.RawMessage

	s      *session
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   atomic.Bool

	mu    sync.Mutex
	cost  float64
	model string
	extra map[string]any
	log   *slog.Logger
}

// Output is a handler's result with more than a value: a partial result,
// an error reported along with data, or proposed next actions. Return it
// (or a pointer to it) as the handler's value.
type Output struct {
	// Data is the result value.
	Data any
	// Partial marks Data as incomplete (status "partial").
	Partial bool
	// Err is the error of a partial result, or the task's error when
	// Partial is false.
	Err error
	// NextActions are follow-ups the agent proposes.
	NextActions []NextAction
}

// Bind decodes the params into v (a pointer). A decoding error is returned
// as an *Error with code "invalid_params".
func (t *Task) Bind(v any) error {
	if err := json.Unmarshal(t.Params, v); err != nil {
		return Errorf(CodeInvalidParams, "params of %s: %v", t.Action, err)
	}
	return nil
}

// ParamsMap returns the params decoded as a map (empty when the params are
// not an object).
func (t *Task) ParamsMap() map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(t.Params, &m)
	return m
}

// Config returns the agent's deployment config from the host's welcome.
func (t *Task) Config() json.RawMessage { return t.s.config }

// Progress reports how far the task is: done out of total (total 0 when
// unknown) and what is happening now. Progress never extends the deadline.
// Reports after the task ended are dropped.
func (t *Task) Progress(done, total float64, msg string) {
	if t.done.Load() {
		return
	}
	_ = t.s.w.send(progressFrame{Type: "progress", ID: t.ID, Progress: done, Total: total, Message: msg})
}

// Log returns a structured logger whose records reach the host as log
// frames tagged with this task.
func (t *Task) Log() *slog.Logger {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.log == nil {
		t.log = slog.New(&frameHandler{agent: t.s.a, s: t.s, taskID: t.ID, logger: t.s.a.name})
	}
	return t.log
}

// Cost adds cost (in the agent's unit, usually US dollars) to the task's
// result metadata and records the model used, if not empty.
func (t *Task) Cost(v float64, model string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cost += v
	if model != "" {
		t.model = model
	}
}

// SetExtra records a fact about the task, such as a token count, in the
// result metadata.
func (t *Task) SetExtra(key string, value any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.extra == nil {
		t.extra = map[string]any{}
	}
	t.extra[key] = value
}

func (t *Task) metadata() *resultMetadata {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cost == 0 && t.model == "" && len(t.extra) == 0 {
		return nil
	}
	return &resultMetadata{Cost: t.cost, Model: t.model, Extra: t.extra}
}

// Typed adapts a function with typed params and result to a Handler. The
// params are decoded into P; a decoding error answers "invalid_params".
func Typed[P, R any](fn func(ctx context.Context, t *Task, params P) (R, error)) Handler {
	return func(ctx context.Context, t *Task) (any, error) {
		var p P
		if err := t.Bind(&p); err != nil {
			return nil, err
		}
		return fn(ctx, t, p)
	}
}

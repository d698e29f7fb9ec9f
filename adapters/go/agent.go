package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Handler runs one task of an action. ctx is cancelled by the host's cancel
// frame, by the task's deadline and by shutdown. The returned value becomes
// the task's result; it must encode as JSON. Return an Output to report a
// partial result, cost-free next actions or an error alongside data.
type Handler func(ctx context.Context, t *Task) (any, error)

// Agent is a set of actions with the facts its hello frame announces.
// Build it with New, add actions with Action, then call Serve.
type Agent struct {
	name           string
	version        string
	description    string
	kind           string
	tags           []string
	maxConcurrency int
	ping           bool
	calls          []string
	maxFrame       int64
	setup          func(ctx context.Context, config json.RawMessage) error

	actions []*action
	byName  map[string]*action

	current atomic.Pointer[session]
}

type action struct {
	name        string
	description string
	schema      json.RawMessage
	check       paramsCheck // schema, parsed when the action is declared
	idempotent  bool
	cacheTTL    time.Duration
	handler     Handler
}

// DefaultMaxConcurrency is the number of tasks an agent runs at once unless
// WithMaxConcurrency says otherwise.
const DefaultMaxConcurrency = 8

// Option configures an Agent.
type Option func(*Agent)

// WithVersion sets the agent's version string.
func WithVersion(v string) Option { return func(a *Agent) { a.version = v } }

// WithDescription sets the agent's human description.
func WithDescription(d string) Option { return func(a *Agent) { a.description = d } }

// WithKind sets the agent's kind: "general" (the default) or "io_gateway".
func WithKind(k string) Option { return func(a *Agent) { a.kind = k } }

// WithTags adds capability tags.
func WithTags(tags ...string) Option {
	return func(a *Agent) { a.tags = append(a.tags, tags...) }
}

// WithMaxConcurrency sets how many tasks run at once (at least 1). The host
// sends no more than this many; any excess waits for a free slot.
func WithMaxConcurrency(n int) Option {
	return func(a *Agent) {
		if n < 1 {
			n = 1
		}
		a.maxConcurrency = n
	}
}

// WithPing declares whether the agent answers ping frames (default true;
// the read loop answers them at once, even while handlers run).
func WithPing(on bool) Option { return func(a *Agent) { a.ping = on } }

// WithCalls declares the host call methods the agent may use, such as
// "agent.call". Task.HostCall refuses undeclared methods.
func WithCalls(methods ...string) Option {
	return func(a *Agent) { a.calls = append(a.calls, methods...) }
}

// WithMaxFrame sets the largest frame in bytes the agent accepts. The
// default is ETHER_MAX_FRAME, or 16 MiB; the link uses the smaller of this
// and the host's limit.
func WithMaxFrame(n int64) Option { return func(a *Agent) { a.maxFrame = n } }

// WithSetup registers a function that runs once after the host's welcome
// and before the first task, with the agent's deployment config. An error
// is fatal: the agent writes a fatal frame (code from an *Error, else
// "fatal_config") and exits 78, so the host does not restart it.
func WithSetup(fn func(ctx context.Context, config json.RawMessage) error) Option {
	return func(a *Agent) { a.setup = fn }
}

// New returns an agent with the given name and options.
func New(name string, opts ...Option) *Agent {
	a := &Agent{
		name:           name,
		version:        "0.0.0",
		maxConcurrency: DefaultMaxConcurrency,
		ping:           true,
		byName:         map[string]*action{},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// ActionOption configures one action.
type ActionOption func(*action)

// WithActionDescription says what the action does.
func WithActionDescription(d string) ActionOption { return func(ac *action) { ac.description = d } }

// WithSchema sets the JSON Schema of the action's params. schema is JSON
// text (string, []byte or json.RawMessage) or a value that encodes as a JSON
// object, such as a map. It panics when the schema is not a JSON object.
func WithSchema(schema any) ActionOption {
	var raw []byte
	switch s := schema.(type) {
	case string:
		raw = []byte(s)
	case []byte:
		raw = s
	case json.RawMessage:
		raw = s
	default:
		b, err := json.Marshal(schema)
		if err != nil {
			panic(fmt.Sprintf("agent: WithSchema: %v", err))
		}
		raw = b
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		panic(fmt.Sprintf("agent: WithSchema: the schema must be a JSON object: %s", raw))
	}
	compact, _ := json.Marshal(obj)
	return func(ac *action) { ac.schema = compact }
}

// Idempotent marks the action as safe to run twice, so the host may retry
// it after a crash.
func Idempotent() ActionOption { return func(ac *action) { ac.idempotent = true } }

// CacheTTL lets the host answer a task of the action from its result cache
// for ttl after a SUCCESS with the same params (a ttl of 0 or less: not
// cached).
func CacheTTL(ttl time.Duration) ActionOption {
	return func(ac *action) { ac.cacheTTL = max(ttl, 0) }
}

// Action registers a handler under name. It panics on an empty or
// duplicate name, like http.ServeMux does.
func (a *Agent) Action(name string, h Handler, opts ...ActionOption) {
	if name == "" || h == nil {
		panic("agent: Action needs a name and a handler")
	}
	if _, dup := a.byName[name]; dup {
		panic("agent: duplicate action " + name)
	}
	ac := &action{name: name, handler: h}
	for _, o := range opts {
		o(ac)
	}
	ac.check = compileSchema(ac.schema)
	a.actions = append(a.actions, ac)
	a.byName[name] = ac
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.name }

// Logger returns a logger whose records go to the host as log frames
// (without a task); before the handshake and after the link closes they go
// to stderr.
func (a *Agent) Logger() *slog.Logger {
	return slog.New(&frameHandler{agent: a, logger: a.name})
}

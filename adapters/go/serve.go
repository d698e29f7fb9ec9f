package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	cookieEnv   = "ETHER_HOST_COOKIE"
	cookieValue = "ether-agent-v1"

	// DefaultMaxFrame is the max frame when neither the host
	// (ETHER_MAX_FRAME) nor WithMaxFrame says otherwise: 16 MiB.
	DefaultMaxFrame = 16 << 20
	// DefaultShutdownGrace is how long in-flight tasks may run after stdin
	// closes without a shutdown frame, before their contexts are cancelled.
	DefaultShutdownGrace = 5 * time.Second
	// sigtermGrace is the grace after SIGTERM; the host kills 3 s later.
	sigtermGrace = 2 * time.Second
	// hardStopAfter is how long handlers have to return once their
	// contexts were cancelled at the end of the grace.
	hardStopAfter = time.Second
)

// Causes of a task context's cancellation.
var (
	errDeadline = errors.New("the task's deadline passed")
	errShutdown = errors.New("the agent shut down before the task finished")
)

// cancelCause is the cause of a cancel frame.
type cancelCause struct{ reason string }

func (c *cancelCause) Error() string {
	if c.reason == "" {
		return "cancelled by the host"
	}
	return "cancelled by the host: " + c.reason
}

// session is one run of the stdio link.
type session struct {
	a      *Agent
	w      *frameWriter
	stderr io.Writer
	env    func(string) string

	maxFrame atomic.Int64 // the link's max frame
	level    atomic.Int64 // slog.Level for log frames
	config   json.RawMessage
	welcome  rawFrame

	base     context.Context
	sem      chan struct{}
	welcomed chan struct{} // closed by the reader on welcome
	ready    chan struct{} // closed once setup ran; tasks wait for it
	idle     chan struct{} // closed when draining and nothing is in flight
	hard     chan struct{} // closed when stuck handlers are given up on
	callSeq  atomic.Uint64

	// Owned by whichever goroutine is the reader at the time (see readLoop).
	frames  *lineReader
	started *taskRun // a task the frame just read started, for the reader to run

	mu            sync.Mutex
	gotWelcome    bool
	orderly       bool // a shutdown frame came
	linkClosed    bool // stdin reached EOF
	draining      bool
	drainDeadline time.Time
	drainTimer    *time.Timer
	idleClosed    bool
	hardArmed     bool
	tasks         map[string]*Task
	calls         map[string]chan replyMsg
	inflight      int
	noise         int
}

func newSession(ctx context.Context, a *Agent, out, stderr io.Writer, env func(string) string) *session {
	s := &session{
		a:        a,
		stderr:   stderr,
		env:      env,
		base:     context.WithoutCancel(ctx),
		sem:      make(chan struct{}, a.maxConcurrency),
		welcomed: make(chan struct{}),
		ready:    make(chan struct{}),
		idle:     make(chan struct{}),
		hard:     make(chan struct{}),
		tasks:    map[string]*Task{},
		calls:    map[string]chan replyMsg{},
	}
	max := a.maxFrame
	if max <= 0 {
		if n, err := strconv.ParseInt(strings.TrimSpace(env("ETHER_MAX_FRAME")), 10, 64); err == nil && n > 0 {
			max = n
		} else {
			max = DefaultMaxFrame
		}
	}
	s.maxFrame.Store(max)
	s.w = newFrameWriter(out, max, func(err error) {
		s.warn("cannot write frames (%v); shutting down", err)
		go s.drain(0, "frame stream broken")
	})
	return s
}

// ServeStream runs the stdio link over r and w instead of the process's
// stdin and stdout, for tests and embedding: it writes hello, waits for
// welcome, serves tasks and returns when r ends (or ctx is done) and the
// in-flight tasks finished. Unlike Serve it checks no cookie, leaves fds,
// signals and the parent process alone, and returns instead of exiting. A
// refused handshake or a failed setup returns an *Error.
func (a *Agent) ServeStream(ctx context.Context, r io.Reader, w io.Writer) error {
	s := newSession(ctx, a, w, os.Stderr, os.Getenv)
	stop := context.AfterFunc(ctx, func() { s.drain(0, "context done") })
	defer stop()
	return s.run(r)
}

// run performs the handshake and serves until the session drains. It
// returns an *Error for a fatal condition (exit 78), another error for a
// broken link and nil for a clean end.
func (s *session) run(in io.Reader) error {
	s.a.current.Store(s)
	defer s.a.current.CompareAndSwap(s, nil)

	proto, verr := pickVersion(s.env("ETHER_PROTOCOL_VERSIONS"))
	if verr != nil {
		_ = s.w.send(fatalFrame{Type: "fatal", Code: verr.Code, Message: verr.Message})
		s.warn("%s", verr.Message)
		return verr
	}
	if err := s.w.send(s.hello(proto)); err != nil {
		return fmt.Errorf("agent: writing hello: %w", err)
	}
	s.frames = newLineReader(in, s.maxFrame.Load)
	go s.readLoop()

	select {
	case <-s.welcomed:
	case <-s.idle: // stdin closed before the welcome
		return nil
	}
	if raw := s.welcome.raw("error"); raw != nil {
		var body errorBody
		_ = json.Unmarshal(raw, &body)
		e := body.toError()
		if e.Code == "" {
			e.Code = CodeProtocolUnsupported
		}
		s.warn("the host refused this agent: %s (%s)", e.Message, e.Code)
		return e
	}
	if s.a.setup != nil {
		if err := s.a.setup(s.base, s.config); err != nil {
			e := &Error{Code: CodeFatalConfig, Message: err.Error()}
			if errors.As(err, &e) && e.Code == "" {
				e.Code = CodeFatalConfig
			}
			_ = s.w.send(fatalFrame{Type: "fatal", Code: e.Code, Message: e.Message})
			s.warn("setup failed: %s", e.Message)
			return e
		}
	}
	close(s.ready)
	select {
	case <-s.idle:
	case <-s.hard:
		s.abandonStuck()
	}
	return nil
}

// pickVersion chooses the highest protocol version both sides speak.
func pickVersion(offered string) (int, *Error) {
	if strings.TrimSpace(offered) == "" {
		offered = "1"
	}
	best := 0
	for _, f := range strings.Split(offered, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			continue
		}
		for _, sv := range supportedVersions {
			if v == sv && v > best {
				best = v
			}
		}
	}
	if best == 0 {
		return 0, &Error{
			Code:    CodeProtocolUnsupported,
			Message: fmt.Sprintf("the host offers protocol versions %q; this Go agent speaks %v", offered, supportedVersions),
			Data:    map[string]any{"supported": supportedVersions},
		}
	}
	return best, nil
}

func (s *session) hello(proto int) helloFrame {
	a := s.a
	actions := make([]actionInfo, 0, len(a.actions))
	for _, ac := range a.actions {
		actions = append(actions, actionInfo{Name: ac.name, Description: ac.description, ParamsSchema: ac.schema, Idempotent: ac.idempotent, CacheTTL: ac.cacheTTL.Seconds()})
	}
	calls := append([]string{}, a.calls...)
	return helloFrame{
		Type:     "hello",
		Protocol: proto,
		Agent: identity{
			Name: a.name, Version: a.version, Language: "go", Runtime: runtime.Version(),
			Description: a.description, Kind: a.kind, Tags: a.tags,
		},
		Actions: actions,
		Capabilities: capabilities{
			MaxConcurrency: a.maxConcurrency, Cancel: true, Progress: true, Ping: a.ping,
			Calls: calls, MaxFrame: s.maxFrame.Load(),
		},
		PID: os.Getpid(),
	}
}

// readLoop reads host frames until EOF. It never blocks on a handler: when a
// frame starts a task, a new reader goroutine takes over the frames and this one
// runs the task. The other way round (go runTask) the task waited for another
// thread to wake up and pick it up, on every task's path; now the next reader
// waits for that instead, and the next frame is rarely there yet.
func (s *session) readLoop() {
	for {
		line, tooLong, err := s.frames.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.warn("reading frames: %v", err)
			}
			s.onEOF()
			return
		}
		switch {
		case tooLong:
			s.onOversized(line)
		case len(bytes.TrimSpace(line)) == 0:
		case !utf8.Valid(line):
			s.onNoise("invalid UTF-8", line)
		default:
			if f, ok := parseFrame(line); ok {
				s.dispatch(f)
				if run := s.started; run != nil {
					s.started = nil
					go s.readLoop()
					s.runTask(run.task, run.action)
					return
				}
			} else {
				s.onNoise("not a JSON object", line)
			}
		}
	}
}

func (s *session) dispatch(f rawFrame) {
	typ := f.str("type")
	if typ == "task" && !s.welcomeSeen() {
		// A host that skips the welcome (the seeds' envelope) has spoken:
		// serve it with the defaults.
		s.onWelcome(rawFrame{})
	}
	if typ != "welcome" && !s.welcomeSeen() {
		s.warn("dropped a %q frame that came before the welcome", typ)
		return
	}
	switch typ {
	case "welcome":
		s.onWelcome(f)
	case "task":
		s.onTask(f)
	case "cancel":
		s.onCancel(f)
	case "reply":
		s.onReply(f)
	case "ping":
		_ = s.w.send(pongFrame{Type: "pong", ID: f.str("id")})
	case "shutdown":
		s.mu.Lock()
		s.orderly = true
		s.mu.Unlock()
		s.drain(time.Duration(max(0, f.num("grace_ms")))*time.Millisecond, "shutdown: "+f.str("reason"))
	default:
		s.warn("dropped a frame of unknown type %q", typ)
	}
}

func (s *session) welcomeSeen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gotWelcome
}

// linkUp reports whether frames may be written: after the welcome, while
// the stream works.
func (s *session) linkUp() bool { return s.welcomeSeen() && !s.w.broken.Load() }

func (s *session) onWelcome(f rawFrame) {
	s.mu.Lock()
	if s.gotWelcome {
		s.mu.Unlock()
		s.warn("dropped a second welcome")
		return
	}
	if m := f.num("max_frame"); m > 0 && m < s.maxFrame.Load() {
		s.maxFrame.Store(m)
		s.w.max.Store(m)
	}
	s.level.Store(int64(parseLevel(f.str("log_level"))))
	s.config = f.raw("config")
	if s.config == nil {
		s.config = json.RawMessage("{}")
	}
	s.welcome = f
	s.gotWelcome = true
	s.mu.Unlock()
	close(s.welcomed)
}

func (s *session) onTask(f rawFrame) {
	id := f.str("id")
	if id == "" {
		s.warn("dropped a task without a string id")
		return
	}
	legacy := !f.has("action") && f.has("payload")
	name := f.str("action")
	params := f.raw("params")
	if legacy {
		params = f.raw("payload")
		name = "run"
		if _, ok := s.a.byName[name]; !ok && len(s.a.actions) == 1 {
			name = s.a.actions[0].name
		}
	}
	if params == nil {
		params = json.RawMessage("{}")
	}
	t := &Task{
		ID: id, Action: name, Params: params, Attempt: int(f.num("attempt")),
		TaskID: f.str("task_id"), SessionID: f.str("session_id"), Budget: f.raw("budget"),
		s: s,
	}
	if tr := f.raw("trace"); tr != nil {
		_ = json.Unmarshal(tr, &t.Trace)
	}
	if tp := f.str("traceparent"); validTraceParent(tp) {
		t.TraceParent, t.TraceState = tp, f.str("tracestate")
	}
	ac := s.a.byName[name]

	s.mu.Lock()
	switch {
	case s.tasks[id] != nil:
		s.mu.Unlock()
		s.warn("dropped a task whose id %q is already in flight", id)
		return
	case s.draining:
		s.mu.Unlock()
		s.reject(t, &Error{Code: CodeShuttingDown, Message: "the agent is shutting down", Retryable: true})
		return
	case ac == nil:
		s.mu.Unlock()
		names := make([]string, 0, len(s.a.actions))
		for _, a := range s.a.actions {
			names = append(names, a.name)
		}
		s.reject(t, Errorf(CodeUnknownAction, "unknown action %q", name).WithData("actions", names))
		return
	}
	ctx, cancel := context.WithCancelCause(s.base)
	t.ctx, t.cancel = ctx, cancel
	if ms := f.num("deadline_ms"); ms > 0 {
		t.Deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
		dctx, stop := context.WithDeadlineCause(ctx, t.Deadline, errDeadline)
		t.ctx = dctx
		t.cancel = func(cause error) { cancel(cause); stop() }
	}
	s.tasks[id] = t
	s.inflight++
	s.mu.Unlock()
	s.started = &taskRun{task: t, action: ac} // run by the reader (readLoop)
}

type taskRun struct {
	task   *Task
	action *action
}

func (s *session) onCancel(f rawFrame) {
	id := f.str("id")
	s.mu.Lock()
	t := s.tasks[id]
	s.mu.Unlock()
	if t == nil {
		return // finished already, or never ours
	}
	t.cancel(&cancelCause{reason: f.str("reason")})
}

func (s *session) onOversized(head []byte) {
	id := recoverField(head, idPattern)
	typ := recoverField(head, typePattern)
	max := s.maxFrame.Load()
	s.warn("skipped a line over the max frame of %d bytes (type %q, id %q)", max, typ, id)
	tooLarge := Errorf(CodeFrameTooLarge, "the frame exceeds the max frame of %d bytes", max)
	if strings.HasPrefix(id, "a-") && s.failCall(id, tooLarge) {
		return
	}
	if id == "" || (typ != "" && typ != "task") || !s.welcomeSeen() {
		return
	}
	s.mu.Lock()
	busy := s.tasks[id] != nil
	s.mu.Unlock()
	if !busy {
		s.reject(&Task{ID: id, s: s}, tooLarge)
	}
}

func (s *session) onNoise(what string, line []byte) {
	s.mu.Lock()
	s.noise++
	n := s.noise
	s.mu.Unlock()
	sample := line
	if len(sample) > 120 {
		sample = sample[:120]
	}
	s.warn("skipped a line that is %s (%d bytes, %d so far): %q", what, len(line), n, sample)
}

func (s *session) onEOF() {
	s.mu.Lock()
	s.linkClosed = true
	s.mu.Unlock()
	s.failAllCalls(Errorf(CodeCancelled, "the host closed the link"))
	s.drain(DefaultShutdownGrace, "stdin closed")
}

// drain stops taking tasks and lets the in-flight ones run for grace at
// most (a later, shorter grace wins), then cancels them.
func (s *session) drain(grace time.Duration, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dl := time.Now().Add(grace)
	if !s.draining || dl.Before(s.drainDeadline) {
		if !s.draining && s.inflight > 0 {
			s.logf("INFO", "shutting down (%s) with %d task(s) in flight, grace %s", reason, s.inflight, grace)
		}
		s.draining = true
		s.drainDeadline = dl
		if s.drainTimer != nil {
			s.drainTimer.Stop()
		}
		s.drainTimer = time.AfterFunc(grace, s.cancelInFlight)
	}
	s.checkIdleLocked()
}

// sigterm handles SIGTERM from the host: a shutdown with a short grace,
// or at once when a shutdown is already under way.
func (s *session) sigterm() {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		s.drain(0, "SIGTERM")
	} else {
		s.drain(sigtermGrace, "SIGTERM")
	}
}

func (s *session) orderlyStop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orderly
}

func (s *session) cancelInFlight() {
	s.mu.Lock()
	tasks := make([]*Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		tasks = append(tasks, t)
	}
	arm := len(tasks) > 0 && !s.hardArmed
	if arm {
		s.hardArmed = true
	}
	s.mu.Unlock()
	for _, t := range tasks {
		t.cancel(errShutdown)
	}
	if arm {
		time.AfterFunc(hardStopAfter, func() { close(s.hard) })
	}
}

func (s *session) checkIdleLocked() {
	if s.draining && s.inflight == 0 && !s.idleClosed {
		s.idleClosed = true
		close(s.idle)
	}
}

func (s *session) runTask(t *Task, ac *action) {
	var (
		v   any
		err error
	)
	if problems := ac.check.validateParams(t.Params); len(problems) > 0 {
		s.finish(t, nil, Errorf(CodeInvalidParams, "%s", strings.Join(problems, "; ")).WithData("problems", problems))
		return
	}
	select {
	case <-s.ready:
		select {
		case s.sem <- struct{}{}:
			v, err = s.invoke(ac, t)
			<-s.sem
		case <-t.ctx.Done():
			err = t.ctx.Err()
		}
	case <-t.ctx.Done():
		err = t.ctx.Err()
	}
	s.finish(t, v, err)
}

func (s *session) warn(format string, args ...any) { s.logf("WARN", format, args...) }

// logf writes a diagnostic line to stderr, with a level prefix the host
// parses.
func (s *session) logf(level, format string, args ...any) {
	fmt.Fprintf(s.stderr, "["+level+"] ether-agent: "+format+"\n", args...)
}

package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// TermCalls are every "term.*" method, to pass to WithCalls; the deployment
// grants them (calls = ["term.*"] in agent.toml).
var TermCalls = []string{
	"term.create", "term.list", "term.get", "term.write", "term.read",
	"term.wait", "term.resize", "term.signal", "term.close", "term.run",
}

// termSlack is how much longer than its own timeout a waiting term call's
// reply may take.
const termSlack = 30 * time.Second

// ExitStatus is how a terminal's program ended.
type ExitStatus struct {
	Code       *int   `json:"code"`
	Signal     *int   `json:"signal"`
	SignalName string `json:"signal_name"`
}

// RunRequest runs a command in a new terminal ("term.run") until it exits,
// prints Pattern (a regex) or stays quiet for Quiet, at most Timeout (60s
// when 0). Set Command (a shell command line) or Argv.
type RunRequest struct {
	Command string
	Argv    []string
	Cwd     string
	Env     map[string]string
	Pattern string
	Quiet   time.Duration
	Timeout time.Duration
	// Limit is the characters of head and of tail kept (4000 when 0).
	Limit int
	// Keep keeps the terminal after the program exited.
	Keep bool
}

// RunResult is what term.run saw: why it stopped, and the head and tail of
// the output as text.
type RunResult struct {
	// Reason is "exit", "pattern", "quiet" or "timeout".
	Reason     string `json:"reason"`
	Head       string `json:"head"`
	Tail       string `json:"tail"`
	TotalChars int    `json:"total_chars"`
	// Truncated is true when head and tail do not cover the whole output.
	Truncated    bool        `json:"truncated"`
	ExitStatus   *ExitStatus `json:"exit_status"`
	Running      bool        `json:"running"`
	TerminalID   string      `json:"terminal_id"`
	Closed       bool        `json:"closed"`
	Match        string      `json:"match"`
	Groups       []string    `json:"groups"`
	OutputOffset int64       `json:"output_offset"`
	Waited       float64     `json:"waited"`
}

// ExitCode is the program's exit code, or -1 when it has none (still
// running, or killed by a signal).
func (r *RunResult) ExitCode() int {
	if r.ExitStatus == nil || r.ExitStatus.Code == nil {
		return -1
	}
	return *r.ExitStatus.Code
}

// Output is the whole output when it fit, else head, a marker and tail.
func (r *RunResult) Output() string {
	if !r.Truncated {
		skip := max(0, len(r.Head)+len(r.Tail)-r.TotalChars)
		if skip > len(r.Tail) {
			skip = len(r.Tail)
		}
		return r.Head + r.Tail[skip:]
	}
	return fmt.Sprintf("%s\n[... %d characters ...]\n%s", r.Head, r.TotalChars-len(r.Head)-len(r.Tail), r.Tail)
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func until(pattern string, quiet time.Duration) map[string]any {
	u := map[string]any{}
	if pattern != "" {
		u["pattern"] = pattern
	}
	if quiet > 0 {
		u["quiet"] = seconds(quiet)
	}
	return u
}

// withWait bounds ctx to wait plus some slack for the reply.
func withWait(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, wait+termSlack)
}

// RunCommand runs a command in a new terminal until it exits, goes quiet or
// prints a pattern, and returns the head and tail of its output. The
// terminal uses TERM=dumb, PAGER=cat and NO_COLOR=1 unless Env says
// otherwise; it is closed when the program has exited (unless Keep).
func RunCommand(ctx context.Context, t *Task, req RunRequest) (*RunResult, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 4000
	}
	params := map[string]any{
		"timeout": seconds(timeout),
		"limit":   limit,
		"keep":    req.Keep,
		"until":   until(req.Pattern, req.Quiet),
	}
	if req.Argv != nil {
		params["argv"] = req.Argv
	} else {
		params["command"] = req.Command
	}
	if req.Cwd != "" {
		params["cwd"] = req.Cwd
	}
	if len(req.Env) > 0 {
		params["env"] = req.Env
	}
	ctx, cancel := withWait(ctx, timeout)
	defer cancel()
	var r RunResult
	if err := callInto(ctx, t, "term.run", params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// OpenRequest starts a terminal ("term.create"): Command (a shell command
// line), Argv, or the host's shell when both are empty.
type OpenRequest struct {
	Command     string
	Argv        []string
	Cwd         string
	Env         map[string]string
	Rows, Cols  int
	Name        string
	Term        string
	IdleTimeout time.Duration
}

// TerminalInfo describes a terminal.
type TerminalInfo struct {
	TerminalID   string      `json:"terminal_id"`
	Name         string      `json:"name"`
	Owner        string      `json:"owner"`
	Argv         []string    `json:"argv"`
	Cwd          string      `json:"cwd"`
	Rows         int         `json:"rows"`
	Cols         int         `json:"cols"`
	State        string      `json:"state"`
	PID          int         `json:"pid"`
	OutputOffset int64       `json:"output_offset"`
	ExitStatus   *ExitStatus `json:"exit_status"`
}

// Screen is a terminal's emulated screen ("term.read").
type Screen struct {
	Rows   int      `json:"rows"`
	Cols   int      `json:"cols"`
	Lines  []string `json:"lines"`
	Cursor struct {
		Row     int  `json:"row"`
		Col     int  `json:"col"`
		Visible bool `json:"visible"`
	} `json:"cursor"`
	Title           string      `json:"title"`
	AlternateScreen bool        `json:"alternate_screen"`
	OutputOffset    int64       `json:"output_offset"`
	Exited          bool        `json:"exited"`
	ExitStatus      *ExitStatus `json:"exit_status"`
	Scrollback      []string    `json:"scrollback,omitempty"`
}

// WaitResult is the answer of "term.wait": Matched is false on timeout
// ("timeout") or exit ("exited"), with Reason.
type WaitResult struct {
	Matched          bool        `json:"matched"`
	Reason           string      `json:"reason"`
	Match            string      `json:"match"`
	Groups           []string    `json:"groups"`
	MatchStartOffset int64       `json:"match_start_offset"`
	MatchEndOffset   int64       `json:"match_end_offset"`
	Screen           Screen      `json:"screen"`
	OutputOffset     int64       `json:"output_offset"`
	ExitStatus       *ExitStatus `json:"exit_status"`
	Waited           float64     `json:"waited"`
}

// Terminal is a terminal the agent owns; Close it when done (the host
// closes it when the agent stops).
type Terminal struct {
	t    *Task
	Info TerminalInfo
}

// ID is the terminal's id.
func (term *Terminal) ID() string { return term.Info.TerminalID }

// OpenTerminal starts a terminal ("term.create").
func OpenTerminal(ctx context.Context, t *Task, req OpenRequest) (*Terminal, error) {
	params := map[string]any{"rows": req.Rows, "cols": req.Cols, "name": req.Name, "term": req.Term}
	if req.Argv != nil {
		params["argv"] = req.Argv
	} else if req.Command != "" {
		params["command"] = req.Command
	}
	if req.Cwd != "" {
		params["cwd"] = req.Cwd
	}
	if len(req.Env) > 0 {
		params["env"] = req.Env
	}
	if req.IdleTimeout > 0 {
		params["idle_timeout"] = seconds(req.IdleTimeout)
	}
	term := &Terminal{t: t}
	if err := callInto(ctx, t, "term.create", params, &term.Info); err != nil {
		return nil, err
	}
	return term, nil
}

func (term *Terminal) call(ctx context.Context, method string, params map[string]any, out any) error {
	if params == nil {
		params = map[string]any{}
	}
	params["terminal_id"] = term.ID()
	return callInto(ctx, term.t, method, params, out)
}

// Write types text (use "\r" for Enter).
func (term *Terminal) Write(ctx context.Context, text string) error {
	return term.call(ctx, "term.write", map[string]any{"text": text}, nil)
}

// WriteBytes sends raw bytes.
func (term *Terminal) WriteBytes(ctx context.Context, data []byte) error {
	return term.call(ctx, "term.write", map[string]any{"data_b64": base64.StdEncoding.EncodeToString(data)}, nil)
}

// Key presses a named key (Enter, Tab, Escape, Up, F1 ...) repeat times.
func (term *Terminal) Key(ctx context.Context, name string, repeat int, alt bool) error {
	if repeat < 1 {
		repeat = 1
	}
	return term.call(ctx, "term.write", map[string]any{"key": strings.ToUpper(name), "repeat": repeat, "alt": alt}, nil)
}

// Ctrl presses Ctrl-<letter>: "c" interrupts, "d" ends input.
func (term *Terminal) Ctrl(ctx context.Context, letter string) error {
	return term.call(ctx, "term.write", map[string]any{"ctrl": letter}, nil)
}

// Paste pastes text (bracketed when the program asked for it).
func (term *Terminal) Paste(ctx context.Context, text string) error {
	return term.call(ctx, "term.write", map[string]any{"text": text, "paste": true}, nil)
}

// Screen reads the emulated screen ("term.read").
func (term *Terminal) Screen(ctx context.Context, scrollback bool) (*Screen, error) {
	var s Screen
	if err := term.call(ctx, "term.read", map[string]any{"scrollback": scrollback}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Get returns the terminal's current info ("term.get").
func (term *Terminal) Get(ctx context.Context) (*TerminalInfo, error) {
	var info TerminalInfo
	if err := term.call(ctx, "term.get", nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (term *Terminal) wait(ctx context.Context, timeout time.Duration, cond map[string]any) (*WaitResult, error) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cond["timeout"] = seconds(timeout)
	ctx, cancel := withWait(ctx, timeout)
	defer cancel()
	var r WaitResult
	if err := term.call(ctx, "term.wait", cond, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WaitScreen waits until regex (multiline) matches the screen.
func (term *Terminal) WaitScreen(ctx context.Context, regex string, timeout time.Duration) (*WaitResult, error) {
	return term.wait(ctx, timeout, map[string]any{"screen": regex})
}

// WaitOutput waits until regex matches output (escape sequences removed)
// from offset after on; after < 0 means output from now on.
func (term *Terminal) WaitOutput(ctx context.Context, regex string, after int64, timeout time.Duration) (*WaitResult, error) {
	cond := map[string]any{"output": regex, "raw": false}
	if after >= 0 {
		cond["after_offset"] = after
	}
	return term.wait(ctx, timeout, cond)
}

// WaitExit waits until the program exits.
func (term *Terminal) WaitExit(ctx context.Context, timeout time.Duration) (*WaitResult, error) {
	return term.wait(ctx, timeout, map[string]any{"exit": true})
}

// WaitQuiet waits until the program prints nothing for quiet.
func (term *Terminal) WaitQuiet(ctx context.Context, quiet, timeout time.Duration) (*WaitResult, error) {
	return term.wait(ctx, timeout, map[string]any{"quiet": seconds(quiet)})
}

// Run types command and Enter into this terminal (a shell), then collects
// its output until pattern appears or it is quiet for quiet (1s when 0).
func (term *Terminal) Run(ctx context.Context, command, pattern string, quiet, timeout time.Duration) (*RunResult, error) {
	if quiet <= 0 && pattern == "" {
		quiet = time.Second
	}
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	params := map[string]any{"command": command, "timeout": seconds(timeout), "limit": 4000, "until": until(pattern, quiet)}
	ctx, cancel := withWait(ctx, timeout)
	defer cancel()
	var r RunResult
	if err := term.call(ctx, "term.run", params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Resize sets the terminal's size; it returns the size applied.
func (term *Terminal) Resize(ctx context.Context, rows, cols int) (int, int, error) {
	var r struct {
		Rows int `json:"rows"`
		Cols int `json:"cols"`
	}
	err := term.call(ctx, "term.resize", map[string]any{"rows": rows, "cols": cols}, &r)
	return r.Rows, r.Cols, err
}

// Signal sends a signal ("INT", "TERM" ...) to the program, or to the
// terminal's foreground process group.
func (term *Terminal) Signal(ctx context.Context, name string, foreground bool) error {
	return term.call(ctx, "term.signal", map[string]any{"signal": name, "foreground": foreground}, nil)
}

// Close ends the program (SIGHUP, then SIGKILL after grace; the host's
// default when 0) and removes the terminal.
func (term *Terminal) Close(ctx context.Context, grace time.Duration) (*TerminalInfo, error) {
	params := map[string]any{}
	if grace > 0 {
		params["grace"] = seconds(grace)
	}
	var info TerminalInfo
	if err := term.call(ctx, "term.close", params, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListTerminals lists the agent's terminals ("term.list").
func ListTerminals(ctx context.Context, t *Task) (json.RawMessage, error) {
	return t.HostCall(ctx, "term.list", nil)
}

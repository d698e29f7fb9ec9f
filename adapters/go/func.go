package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
)

// ServeFunc serves fn as a single-action agent, in the style of the seeds'
// agents: the action is "run", fn gets the task's params as a map and
// returns the result (any JSON value) or an error. It never returns.
//
// Under the host (ETHER_HOST_COOKIE set) it speaks the full protocol, like
// Serve. Started without the cookie it speaks the seeds' minimal envelope
// instead: no hello; {"id","type":"task","payload"} lines in and
// {"id","status":"ok","result"} or {"id","status":"error","error":"message"}
// lines out, one task at a time, until stdin ends.
func ServeFunc(fn func(payload map[string]any) (any, error), opts ...Option) {
	name := os.Getenv("ETHER_AGENT_NAME")
	if name == "" {
		name = filepath.Base(os.Args[0])
	}
	a := New(name, opts...)
	a.Action("run", funcHandler(fn), WithActionDescription("Runs the agent's function on the params."))
	if os.Getenv(cookieEnv) != cookieValue {
		in, out := takeOverStdio()
		os.Exit(serveEnvelope(fn, in, out))
	}
	a.Serve()
}

func funcHandler(fn func(map[string]any) (any, error)) Handler {
	return func(_ context.Context, t *Task) (any, error) {
		var payload map[string]any
		if err := json.Unmarshal(t.Params, &payload); err != nil || payload == nil {
			return nil, Errorf(CodeInvalidParams, "the payload must be a JSON object")
		}
		return fn(payload)
	}
}

// serveEnvelope answers the seeds' minimal envelope until in ends.
func serveEnvelope(fn func(map[string]any) (any, error), in io.Reader, out io.Writer) int {
	w := newFrameWriter(out, DefaultMaxFrame, nil)
	lr := newLineReader(in, func() int64 { return DefaultMaxFrame })
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "[ERROR] ether-agent: reading tasks: %v\n", err)
			return 1
		}
		if tooLong {
			if id := recoverField(line, idPattern); id != "" {
				_ = w.send(legacyResultFrame{ID: id, Status: "error", Error: "frame_too_large: the task exceeds the max frame"})
			}
			continue
		}
		f, ok := parseFrame(line)
		if !ok || f.str("id") == "" {
			if len(line) > 0 {
				fmt.Fprintf(os.Stderr, "[WARN] ether-agent: skipped a line that is not a task\n")
			}
			continue
		}
		id := f.str("id")
		payload := f.raw("payload")
		if payload == nil {
			payload = f.raw("params")
		}
		r := legacyResultFrame{ID: id}
		v, err := callFunc(fn, payload)
		if err == nil {
			r.Result, err = marshalValue(v)
		}
		if err != nil {
			r.Status, r.Result, r.Error = "error", nil, err.Error()
		} else {
			r.Status = "ok"
		}
		if err := w.send(r); err != nil {
			var tl *tooLargeError
			if !errors.As(err, &tl) {
				return 1
			}
			_ = w.send(legacyResultFrame{ID: id, Status: "error", Error: "frame_too_large: " + tl.Error()})
		}
	}
}

func callFunc(fn func(map[string]any) (any, error), payload json.RawMessage) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "[ERROR] ether-agent: panic: %v\n%s", p, debug.Stack())
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	m := map[string]any{}
	if payload != nil {
		if err := json.Unmarshal(payload, &m); err != nil || m == nil {
			return nil, errors.New("the payload must be a JSON object")
		}
	}
	return fn(m)
}

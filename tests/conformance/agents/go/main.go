// Command conformance is the conformance agent written with the Go adapter:
// the contract of tests/conformance/README.md, the same actions as the
// Python and TypeScript agents. With the argument --plain it serves the
// seeds' plain-function style instead: one action, run, that returns its
// payload.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

type sleepParams struct {
	MS int64 `json:"ms" agent:"required"`
}

type progressParams struct {
	Steps int `json:"steps" agent:"required"`
}

type failParams struct {
	Code    string `json:"code" agent:"required"`
	Message string `json:"message" agent:"required"`
}

type bigParams struct {
	Bytes int `json:"bytes" agent:"required"`
}

type printParams struct {
	Text string `json:"text" agent:"required"`
}

type callParams struct {
	Agent  string         `json:"agent" agent:"required"`
	Action string         `json:"action" agent:"required"`
	Params map[string]any `json:"params,omitempty"`
}

// checkedSchema is the params schema of "checked": one property per case of
// tests/conformance/params_rule.json (the same JSON text in the Python and
// TypeScript agents; vectors/params_rule.json checks the hello).
const checkedSchema = `{"type": "object", "properties": {
  "type": {"type": "integer"},
  "required": {"type": "object", "required": ["id"]},
  "properties": {"type": "object", "properties": {"id": {"type": "string"}}},
  "items": {"type": "array", "items": {"type": "integer"}},
  "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
  "closed": {"type": "object", "properties": {"a": {}}, "additionalProperties": false},
  "enum": {"enum": ["red", "green", 1]},
  "const": {"const": {"a": 1, "b": [1, 2]}},
  "minimum": {"type": "number", "minimum": 0},
  "maximum": {"type": "number", "maximum": 10},
  "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 0},
  "exclusiveMaximum": {"type": "number", "exclusiveMaximum": 10},
  "multipleOf": {"type": "number", "multipleOf": 5},
  "minLength": {"type": "string", "minLength": 2},
  "maxLength": {"type": "string", "maxLength": 3},
  "pattern": {"type": "string", "pattern": "^[a-z]+$"},
  "minItems": {"type": "array", "minItems": 1},
  "maxItems": {"type": "array", "maxItems": 2},
  "uniqueItems": {"type": "array", "uniqueItems": true},
  "contains": {"type": "array", "contains": {"type": "string"}},
  "minProperties": {"type": "object", "minProperties": 1},
  "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
  "anyOf": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
  "oneOf": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
  "allOf": {"allOf": [{"minimum": 0}, {"maximum": 10}]},
  "not": {"not": {"type": "string"}}
}}`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--plain" {
		agent.ServeFunc(func(payload map[string]any) (any, error) { return payload, nil })
	}

	a := agent.New("conformance",
		agent.WithVersion("1.0.0"),
		agent.WithDescription("Implements the cross-language conformance contract (Go adapter)."),
		agent.WithMaxConcurrency(128),
		agent.WithMaxFrame(64<<20),
		agent.WithPing(true),
		agent.WithCalls("agent.call"),
	)

	a.Action("echo", func(_ context.Context, t *agent.Task) (any, error) {
		return t.Params, nil
	}, agent.WithActionDescription("Return the params unchanged."), agent.WithSchema(`{"type":"object"}`))

	a.Action("sleep", agent.Typed(func(ctx context.Context, _ *agent.Task, p sleepParams) (any, error) {
		timer := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return map[string]any{"slept": p.MS}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}), agent.WithActionDescription("Sleep ms milliseconds (cancellable); return {slept: ms}."),
		agent.SchemaOf[sleepParams]())

	a.Action("progress", agent.Typed(func(_ context.Context, t *agent.Task, p progressParams) (any, error) {
		for i := 1; i <= p.Steps; i++ {
			t.Progress(float64(i), float64(p.Steps), fmt.Sprintf("step %d of %d", i, p.Steps))
		}
		return map[string]any{"steps": p.Steps}, nil
	}), agent.WithActionDescription("Send `steps` progress frames, then return {steps}."),
		agent.SchemaOf[progressParams]())

	a.Action("fail", agent.Typed(func(_ context.Context, _ *agent.Task, p failParams) (any, error) {
		return nil, &agent.Error{Code: p.Code, Message: p.Message}
	}), agent.WithActionDescription("Fail with the given error code and message."),
		agent.SchemaOf[failParams]())

	a.Action("big", agent.Typed(func(_ context.Context, _ *agent.Task, p bigParams) (any, error) {
		return map[string]any{"data": strings.Repeat("x", max(0, p.Bytes))}, nil
	}), agent.WithActionDescription("Return {data: 'x' * bytes}."),
		agent.SchemaOf[bigParams]())

	a.Action("print", agent.Typed(func(_ context.Context, _ *agent.Task, p printParams) (any, error) {
		fmt.Println(p.Text)
		return map[string]any{"printed": true}, nil
	}), agent.WithActionDescription("fmt.Println the text to stdout; return {printed: true}."),
		agent.SchemaOf[printParams]())

	a.Action("call", agent.Typed(func(ctx context.Context, t *agent.Task, p callParams) (json.RawMessage, error) {
		return t.CallAgent(ctx, p.Agent, p.Action, p.Params)
	}), agent.WithActionDescription("Run `action` of `agent` through the host (agent.call)."),
		agent.SchemaOf[callParams]())

	a.Action("spawn", func(context.Context, *agent.Task) (any, error) {
		child := exec.Command("sleep", "300")
		if err := child.Start(); err != nil {
			return nil, err
		}
		return map[string]any{"pid": child.Process.Pid}, nil
	}, agent.WithActionDescription("Start a child process `sleep 300` without waiting; return {pid}."))

	a.Action("checked", func(_ context.Context, t *agent.Task) (any, error) {
		return t.Params, nil
	}, agent.WithActionDescription("Return the params unchanged (params_rule.json's keywords)."),
		agent.WithSchema(checkedSchema))

	a.Action("host_calls", func(context.Context, *agent.Task) (any, error) {
		known := []string{"agent.call"}
		for _, list := range [][]string{agent.CtxCalls, agent.MsgCalls, agent.NetCalls, agent.TermCalls} {
			known = append(known, list...)
		}
		slices.Sort(known)
		return map[string]any{"calls": slices.Compact(known)}, nil
	}, agent.WithActionDescription("Every host call the SDK knows (its call lists), sorted."))

	a.Serve()
}

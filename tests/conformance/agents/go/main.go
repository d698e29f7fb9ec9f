// Command conformance is the conformance agent written with the Go adapter:
// the same actions as the Python and TypeScript ones (see
// tests/conformance/README.md). With the argument --plain it serves the
// seeds' plain-function style instead: one action, run, echoing its payload.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--plain" {
		agent.ServeFunc(func(payload map[string]any) (any, error) { return payload, nil })
	}

	a := agent.New("conformance",
		agent.WithVersion("1.0.0"),
		agent.WithDescription("Conformance agent for the stdio link (Go adapter)."),
		agent.WithMaxConcurrency(128),
		agent.WithPing(true),
		agent.WithCalls("agent.call"),
	)

	a.Action("echo", func(_ context.Context, t *agent.Task) (any, error) {
		return t.Params, nil
	}, agent.WithActionDescription("Returns its params unchanged."))

	a.Action("sleep", agent.Typed(func(ctx context.Context, _ *agent.Task, p struct {
		MS float64 `json:"ms"`
	}) (any, error) {
		timer := time.NewTimer(time.Duration(p.MS * float64(time.Millisecond)))
		defer timer.Stop()
		select {
		case <-timer.C:
			return map[string]any{"slept": p.MS}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}), agent.WithActionDescription("Sleeps ms milliseconds; cancellable."),
		agent.WithSchema(`{"type":"object","properties":{"ms":{"type":"number","minimum":0}}}`))

	a.Action("progress", agent.Typed(func(_ context.Context, t *agent.Task, p struct {
		Steps int `json:"steps"`
	}) (any, error) {
		for i := 1; i <= p.Steps; i++ {
			t.Progress(float64(i), float64(p.Steps), fmt.Sprintf("step %d of %d", i, p.Steps))
		}
		return map[string]any{"steps": p.Steps}, nil
	}), agent.WithActionDescription("Sends steps progress frames, then {steps}."))

	a.Action("fail", agent.Typed(func(_ context.Context, _ *agent.Task, p struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}) (any, error) {
		if p.Code == "" {
			p.Code = agent.CodeInternal
		}
		return nil, &agent.Error{Code: p.Code, Message: p.Message}
	}), agent.WithActionDescription("Fails with the given code and message."))

	a.Action("big", agent.Typed(func(_ context.Context, _ *agent.Task, p struct {
		Bytes int `json:"bytes"`
	}) (any, error) {
		return map[string]any{"data": strings.Repeat("x", max(0, p.Bytes))}, nil
	}), agent.WithActionDescription("Returns {data} of bytes 'x' characters."))

	a.Action("print", agent.Typed(func(_ context.Context, _ *agent.Task, p struct {
		Text string `json:"text"`
	}) (any, error) {
		fmt.Println(p.Text)
		return map[string]any{"printed": true}, nil
	}), agent.WithActionDescription("fmt.Println(text) from user code; the link must survive."))

	a.Action("call", agent.Typed(func(ctx context.Context, t *agent.Task, p struct {
		Agent  string          `json:"agent"`
		Action string          `json:"action"`
		Params json.RawMessage `json:"params"`
	}) (any, error) {
		var params any = map[string]any{}
		if len(p.Params) > 0 && string(p.Params) != "null" {
			params = p.Params
		}
		return t.CallAgent(ctx, p.Agent, p.Action, params)
	}), agent.WithActionDescription("agent.call through the host; returns the reply's result."))

	a.Serve()
}

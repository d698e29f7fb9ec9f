// Command echo is the benchmark's Go echo agent: echo returns its params
// unchanged; hold returns them after params.ms milliseconds (bench/scale.py
// keeps thousands of tasks in flight with it).
package main

import (
	"context"
	"encoding/json"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

func main() {
	// 128 > the 64 calls the benchmark keeps in flight, so nothing queues in the host.
	a := agent.New("echo-go",
		agent.WithVersion("1.0.0"),
		agent.WithDescription("Benchmark echo agent (Go adapter)."),
		agent.WithMaxConcurrency(128),
	)
	a.Action("echo", func(_ context.Context, t *agent.Task) (any, error) {
		return t.Params, nil
	}, agent.WithActionDescription("Return the params unchanged."), agent.WithSchema(`{"type":"object"}`),
		// Safe to run twice: the host may retry it on another replica when a process dies (make chaos).
		agent.Idempotent())
	a.Action("hold", func(ctx context.Context, t *agent.Task) (any, error) {
		var p struct {
			Ms int `json:"ms"`
		}
		_ = json.Unmarshal(t.Params, &p) // no ms: no wait
		select {
		case <-time.After(time.Duration(p.Ms) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return t.Params, nil
	}, agent.WithActionDescription("Return the params after params.ms milliseconds."),
		agent.WithSchema(`{"type":"object"}`), agent.Idempotent())
	a.Serve()
}

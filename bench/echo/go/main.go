// Command echo is the benchmark's Go echo agent: one action, echo, that
// returns its params unchanged.
package main

import (
	"context"

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
	a.Serve()
}

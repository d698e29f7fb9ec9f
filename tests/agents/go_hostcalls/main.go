// Command gohostcalls exercises the Go SDK's typed host calls: term.run and
// msg.send / msg.receive.
package main

import (
	"context"
	"slices"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

type runParams struct {
	Command string `json:"command" agent:"required"`
}

type sendParams struct {
	Agent string `json:"agent"`
	Type  string `json:"type"`
	Data  any    `json:"data"`
}

type receiveParams struct {
	Wait float64 `json:"wait"`
}

func main() {
	calls := slices.Concat([]string{"agent.call"}, agent.CtxCalls, agent.MsgCalls, agent.TermCalls)
	a := agent.New("gohostcalls", agent.WithCalls(calls...))

	a.Action("run", agent.Typed(func(ctx context.Context, t *agent.Task, p runParams) (map[string]any, error) {
		r, err := agent.RunCommand(ctx, t, agent.RunRequest{Command: p.Command, Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		return map[string]any{"output": r.Output(), "reason": r.Reason, "exit_code": r.ExitCode()}, nil
	}), agent.WithActionDescription("Run a command with term.run; return its output."))

	a.Action("send", agent.Typed(func(ctx context.Context, t *agent.Task, p sendParams) (map[string]any, error) {
		to := p.Agent
		if to == "" {
			to = a.Name()
		}
		typ := p.Type
		if typ == "" {
			typ = "note"
		}
		r, err := agent.MessagesOf(t).Send(ctx, agent.SendRequest{Agent: to, Type: typ, Data: p.Data})
		if err != nil {
			return nil, err
		}
		return map[string]any{"id": r.Message.ID, "mailbox_depth": r.MailboxDepth}, nil
	}), agent.WithActionDescription("Send a message (to itself by default) with msg.send."))

	a.Action("receive", agent.Typed(func(ctx context.Context, t *agent.Task, p receiveParams) (map[string]any, error) {
		msgs, err := agent.MessagesOf(t).Receive(ctx, 10, int64(p.Wait*1000))
		if err != nil {
			return nil, err
		}
		return map[string]any{"messages": msgs}, nil
	}), agent.WithActionDescription("Take messages from the mailbox with msg.receive."))

	a.Action("roundtrip", agent.Typed(func(ctx context.Context, t *agent.Task, p sendParams) (map[string]any, error) {
		m := agent.MessagesOf(t)
		if _, err := m.Send(ctx, agent.SendRequest{Agent: a.Name(), Type: "echo", Data: p.Data}); err != nil {
			return nil, err
		}
		msgs, err := m.Receive(ctx, 10, 5000)
		if err != nil {
			return nil, err
		}
		return map[string]any{"messages": msgs}, nil
	}), agent.WithActionDescription("Send a message to itself and read it back."))

	a.Serve()
}

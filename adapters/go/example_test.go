package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	agent "github.com/etherhost/ether/adapters/go"
)

// serveLines plays a host that sends lines and closes the link, and returns
// the frames the agent wrote after its hello.
func serveLines(a *agent.Agent, lines ...string) []string {
	host := strings.NewReader(`{"type":"welcome","protocol":1}` + "\n" + strings.Join(lines, "\n") + "\n")
	var out bytes.Buffer
	if err := a.ServeStream(context.Background(), host, &out); err != nil {
		panic(err)
	}
	frames := strings.Split(strings.TrimSpace(out.String()), "\n")
	return frames[1:] // frames[0] is the hello
}

func Example() {
	a := agent.New("greeter",
		agent.WithVersion("1.0.0"),
		agent.WithDescription("Greets people."),
		agent.WithMaxConcurrency(4),
	)
	a.Action("greet", func(ctx context.Context, t *agent.Task) (any, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := t.Bind(&p); err != nil {
			return nil, err // code invalid_params
		}
		if p.Name == "" {
			return nil, agent.Errorf(agent.CodeInvalidParams, "name is required")
		}
		return map[string]string{"greeting": "hello " + p.Name}, nil
	}, agent.WithActionDescription("Says hello."),
		agent.WithSchema(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))

	// In a real agent: a.Serve(). Here a scripted host drives it.
	for _, f := range serveLines(a,
		`{"type":"task","id":"h-1","action":"greet","params":{"name":"Ada"}}`,
	) {
		fmt.Println(f)
	}
	// Output:
	// {"type":"result","id":"h-1","status":"ok","result":{"greeting":"hello Ada"}}
}

func ExampleTyped() {
	type params struct {
		A, B int
	}
	a := agent.New("calc")
	a.Action("add", agent.Typed(func(ctx context.Context, t *agent.Task, p params) (int, error) {
		return p.A + p.B, nil
	}))
	for _, f := range serveLines(a, `{"type":"task","id":"h-1","action":"add","params":{"A":2,"B":3}}`) {
		fmt.Println(f)
	}
	// Output:
	// {"type":"result","id":"h-1","status":"ok","result":5}
}

func ExampleErrorf() {
	err := agent.Errorf(agent.CodeNotFound, "no such file: %s", "a.txt").WithData("path", "a.txt")
	fmt.Println(err)
	fmt.Println(agent.CodeOf(err), agent.CodeOf(errors.New("other")), agent.CodeOf(context.Canceled))

	a := agent.New("files")
	a.Action("read", func(context.Context, *agent.Task) (any, error) { return nil, err })
	for _, f := range serveLines(a, `{"type":"task","id":"h-1","action":"read","params":{}}`) {
		fmt.Println(f)
	}
	// Output:
	// not_found: no such file: a.txt
	// not_found internal cancelled
	// {"type":"result","id":"h-1","status":"error","error":{"code":"not_found","message":"no such file: a.txt","data":{"path":"a.txt"}}}
}

func ExampleTask_Progress() {
	a := agent.New("counter")
	a.Action("count", func(ctx context.Context, t *agent.Task) (any, error) {
		for i := 1; i <= 2; i++ {
			t.Progress(float64(i), 2, fmt.Sprintf("step %d", i))
		}
		t.Cost(0.002, "none")
		return "done", nil
	})
	for _, f := range serveLines(a, `{"type":"task","id":"h-1","action":"count","params":{}}`) {
		fmt.Println(f)
	}
	// Output:
	// {"type":"progress","id":"h-1","progress":1,"total":2,"message":"step 1"}
	// {"type":"progress","id":"h-1","progress":2,"total":2,"message":"step 2"}
	// {"type":"result","id":"h-1","status":"ok","result":"done","metadata":{"cost":0.002,"model":"none"}}
}

func ExampleOutput() {
	a := agent.New("crawler")
	a.Action("crawl", func(ctx context.Context, t *agent.Task) (any, error) {
		return agent.Output{
			Data:    []string{"page1"},
			Partial: true,
			Err:     agent.Errorf("rate_limited", "stopped after 1 page").AsRetryable(),
			NextActions: []agent.NextAction{
				{Agent: "crawler", Action: "crawl", Params: map[string]any{"from": 2}, Reason: "continue later"},
			},
		}, nil
	})
	for _, f := range serveLines(a, `{"type":"task","id":"h-1","action":"crawl","params":{}}`) {
		fmt.Println(f)
	}
	// Output:
	// {"type":"result","id":"h-1","status":"partial","result":["page1"],"error":{"code":"rate_limited","message":"stopped after 1 page","retryable":true},"next_actions":[{"agent":"crawler","action":"crawl","params":{"from":2},"reason":"continue later"}]}
}

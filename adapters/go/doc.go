// Package agent is the Go SDK of Ether agents: it serves a set of actions
// to the Ether host over the stdio link described in docs/protocol.md.
//
// An agent is a main package that registers handlers and calls Serve:
//
//	func main() {
//		a := agent.New("greeter", agent.WithVersion("1.0.0"))
//		a.Action("greet", func(ctx context.Context, t *agent.Task) (any, error) {
//			var p struct{ Name string }
//			if err := t.Bind(&p); err != nil {
//				return nil, err
//			}
//			return map[string]string{"greeting": "hello " + p.Name}, nil
//		})
//		a.Serve()
//	}
//
// Handlers take a context first. It is cancelled when the host sends a
// cancel frame, when the task's deadline passes, and when the agent shuts
// down after its grace period. Handlers run concurrently, up to the agent's
// max concurrency.
//
// The package keeps the frame stream away from user code: when the process
// runs under the host (ETHER_HOST_COOKIE is set), the package's init moves
// the frames to a private duplicate of fd 1 and points fd 1 and os.Stdout at
// stderr, so fmt.Println lands in the agent's log instead of corrupting the
// link. It also arms a parent-death signal on the main thread and, while
// serving, polls the parent pid; when the host dies, the agent kills its own
// process group so no grandchild survives.
//
// Errors are reported with *Error, which carries a code such as
// "invalid_params"; any other error becomes code "internal", and a panic in
// a handler becomes "internal" with the stack in data.traceback.
package agent

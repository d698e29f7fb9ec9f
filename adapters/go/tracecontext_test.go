package agent

import (
	"context"
	"testing"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testTaskSpan    = "00f067aa0ba902b7"
	testTraceParent = "00-" + testTraceID + "-" + testTaskSpan + "-01"
	testTraceState  = "ether=t61rcWkgMzE,vendor=x"
)

// relayAgent's "relay" makes one agent.call, through the traceparent in its
// params when one is given, and returns what the task said of its trace.
func relayAgent() *Agent {
	a := New("t", WithCalls("agent.call"))
	a.Action("relay", Typed(func(ctx context.Context, t *Task, p struct{ Explicit string }) (any, error) {
		ctx = ContextWithTraceParent(ctx, p.Explicit, "")
		if _, err := t.CallAgent(ctx, "other", "echo", nil); err != nil {
			return nil, err
		}
		return map[string]string{"parent": t.TraceParent, "state": t.TraceState}, nil
	}))
	return a
}

// relay runs one relay task and returns its call frame and its result.
func relay(h *harness, id string, params map[string]any, extra ...any) (call, result map[string]any) {
	h.t.Helper()
	h.task(id, "relay", params, extra...)
	call = h.recvType("call")
	h.send(map[string]any{"type": "reply", "id": call["id"], "status": "ok", "result": map[string]any{"data": 1}})
	r := h.recvType("result")
	if r["status"] != "ok" {
		h.t.Fatalf("result = %v", r)
	}
	return call, r["result"].(map[string]any)
}

func TestTaskTraceContextReachesTheHandlerAndItsCalls(t *testing.T) {
	h := startSession(t, relayAgent())
	h.handshake()
	call, out := relay(h, "h-1", map[string]any{}, "traceparent", testTraceParent, "tracestate", testTraceState)
	if call["traceparent"] != testTraceParent || call["tracestate"] != testTraceState {
		t.Fatalf("call = %v, want the task's trace context", call)
	}
	if out["parent"] != testTraceParent || out["state"] != testTraceState {
		t.Fatalf("task saw %v", out)
	}
}

func TestUntracedTaskCallsCarryNoTraceContext(t *testing.T) {
	h := startSession(t, relayAgent())
	h.handshake()
	call, out := relay(h, "h-1", map[string]any{})
	if _, ok := call["traceparent"]; ok {
		t.Fatalf("call = %v, want no traceparent", call)
	}
	if _, ok := call["tracestate"]; ok {
		t.Fatalf("call = %v, want no tracestate", call)
	}
	if out["parent"] != "" || out["state"] != "" {
		t.Fatalf("task saw %v", out)
	}
}

func TestContextWithTraceParentOverridesTheTasks(t *testing.T) {
	h := startSession(t, relayAgent())
	h.handshake()
	mine := "00-" + testTraceID + "-1111111111111111-01"
	call, out := relay(h, "h-1", map[string]any{"explicit": mine}, "traceparent", testTraceParent, "tracestate", testTraceState)
	if call["traceparent"] != mine {
		t.Fatalf("call = %v, want traceparent %s", call, mine)
	}
	if _, ok := call["tracestate"]; ok {
		t.Fatalf("call = %v, want no tracestate (none was given with the explicit traceparent)", call)
	}
	if out["parent"] != testTraceParent {
		t.Fatalf("task saw %v", out)
	}
}

func TestMalformedTraceParentIsDroppedAndNeverBreaksTheTask(t *testing.T) {
	h := startSession(t, relayAgent())
	h.handshake()
	bad := []any{
		"garbage",
		123,
		map[string]any{"x": 1},
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + testTaskSpan + "-01", // lowercase hex only
		"ff-" + testTraceID + "-" + testTaskSpan + "-01",              // version ff is invalid
		"00-00000000000000000000000000000000-" + testTaskSpan + "-01", // all-zero trace id
		"00-" + testTraceID + "-0000000000000000-01",                  // all-zero span id
		testTraceParent + "-extra",                                    // version 00 has four fields
	}
	for i, value := range bad {
		call, out := relay(h, "h-"+string(rune('a'+i)), map[string]any{}, "traceparent", value, "tracestate", testTraceState)
		if _, ok := call["traceparent"]; ok {
			t.Fatalf("traceparent %v: call = %v, want none", value, call)
		}
		if _, ok := call["tracestate"]; ok {
			t.Fatalf("traceparent %v: call = %v, want no tracestate", value, call)
		}
		if out["parent"] != "" || out["state"] != "" {
			t.Fatalf("traceparent %v: task saw %v", value, out)
		}
	}
	// A later version may add fields; its first four are read as level 1's.
	future := "01-" + testTraceID + "-" + testTaskSpan + "-01-more"
	call, out := relay(h, "h-future", map[string]any{}, "traceparent", future)
	if call["traceparent"] != future || out["parent"] != future {
		t.Fatalf("call = %v, task saw %v; want %s on both", call, out, future)
	}
}

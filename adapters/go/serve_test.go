package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func testAgent(opts ...Option) *Agent {
	a := New("t", append([]Option{WithVersion("1.2.3"), WithCalls("agent.call")}, opts...)...)
	a.Action("echo", func(_ context.Context, t *Task) (any, error) { return t.Params, nil },
		WithActionDescription("echoes"), WithSchema(`{"type":"object"}`), Idempotent(),
		CacheTTL(90*time.Second))
	a.Action("sleep", Typed(func(ctx context.Context, _ *Task, p struct{ MS int }) (any, error) {
		select {
		case <-time.After(time.Duration(p.MS) * time.Millisecond):
			return map[string]int{"slept": p.MS}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	a.Action("stubborn", func(context.Context, *Task) (any, error) {
		time.Sleep(300 * time.Millisecond)
		return "done anyway", nil
	})
	a.Action("panic", func(context.Context, *Task) (any, error) { panic("kaboom") })
	a.Action("plainerr", func(context.Context, *Task) (any, error) { return nil, errors.New("plain") })
	a.Action("big", Typed(func(_ context.Context, _ *Task, p struct{ Bytes int }) (any, error) {
		return strings.Repeat("x", p.Bytes), nil
	}))
	a.Action("call", func(ctx context.Context, t *Task) (any, error) {
		return t.CallAgent(ctx, "other", "do", map[string]any{"n": 1})
	})
	a.Action("undeclared", func(ctx context.Context, t *Task) (any, error) {
		return t.HostCall(ctx, "net.fetch", nil)
	})
	a.Action("partial", func(_ context.Context, t *Task) (any, error) {
		t.Cost(0.5, "m1")
		t.Cost(0.25, "")
		t.SetExtra("tokens", 12)
		return Output{Data: []int{1}, Partial: true, Err: Errorf("quota", "stopped early"),
			NextActions: []NextAction{{Agent: "b", Action: "c", Reason: "more"}}}, nil
	})
	a.Action("log", func(_ context.Context, t *Task) (any, error) {
		t.Log().Debug("hidden")
		t.Log().With("a", 1).WithGroup("g").Warn("careful", "b", "two", slog.Group("h", "c", 3))
		return nil, nil
	})
	return a
}

func TestHelloAnnouncesAgentActionsAndCapabilities(t *testing.T) {
	h := startSession(t, testAgent(WithMaxConcurrency(4), WithKind("io_gateway"), WithDescription("d")))
	hello := h.handshake()
	if hello["protocol"] != 1.0 {
		t.Errorf("protocol = %v", hello["protocol"])
	}
	ag := hello["agent"].(map[string]any)
	if ag["name"] != "t" || ag["version"] != "1.2.3" || ag["language"] != "go" || ag["kind"] != "io_gateway" || !strings.HasPrefix(ag["runtime"].(string), "go") {
		t.Errorf("agent = %v", ag)
	}
	caps := hello["capabilities"].(map[string]any)
	if caps["max_concurrency"] != 4.0 || caps["cancel"] != true || caps["ping"] != true || caps["max_frame"] != float64(DefaultMaxFrame) {
		t.Errorf("capabilities = %v", caps)
	}
	if calls := caps["calls"].([]any); len(calls) != 1 || calls[0] != "agent.call" {
		t.Errorf("calls = %v", calls)
	}
	first := hello["actions"].([]any)[0].(map[string]any)
	if first["name"] != "echo" || first["idempotent"] != true || first["cache_ttl"] != 90.0 || first["params_schema"].(map[string]any)["type"] != "object" {
		t.Errorf("actions[0] = %v", first)
	}
}

func TestUnsupportedProtocolVersionIsFatal(t *testing.T) {
	t.Setenv("ETHER_PROTOCOL_VERSIONS", "7,9")
	h := startSession(t, testAgent())
	f := h.recv()
	if f["type"] != "fatal" || f["code"] != CodeProtocolUnsupported {
		t.Fatalf("frame = %v, want fatal protocol_version_unsupported", f)
	}
	if err := h.wait(); CodeOf(err) != CodeProtocolUnsupported {
		t.Fatalf("ServeStream = %v", err)
	}
}

func TestHighestCommonVersionIsPicked(t *testing.T) {
	if v, err := pickVersion("2, 1,x"); err != nil || v != 1 {
		t.Fatalf("pickVersion = %v, %v", v, err)
	}
}

func TestWelcomeErrorEndsTheSessionFatally(t *testing.T) {
	h := startSession(t, testAgent())
	h.recv()
	h.send(map[string]any{"type": "welcome", "error": map[string]any{"code": CodeProtocolUnsupported, "message": "no", "data": map[string]any{"supported": []int{2}}}})
	if err := h.wait(); CodeOf(err) != CodeProtocolUnsupported {
		t.Fatalf("ServeStream = %v", err)
	}
}

func TestEchoReturnsParamsVerbatim(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "echo", map[string]any{"text": "héllo ☃ <&>", "n": 1.5})
	r := h.recv()
	if r["type"] != "result" || r["id"] != "h-1" || r["status"] != "ok" {
		t.Fatalf("result = %v", r)
	}
	if got := r["result"].(map[string]any); got["text"] != "héllo ☃ <&>" || got["n"] != 1.5 {
		t.Fatalf("result = %v", got)
	}
}

func TestManyTasksRunConcurrentlyAndFinishOutOfOrder(t *testing.T) {
	h := startSession(t, testAgent(WithMaxConcurrency(100)))
	h.handshake()
	for i := range 100 {
		h.task(fmt.Sprintf("h-%d", i), "sleep", map[string]any{"MS": 200 - 2*i})
	}
	start := time.Now()
	seen := map[string]bool{}
	var order []string
	for range 100 {
		r := h.recvType("result")
		if r["status"] != "ok" {
			t.Fatalf("result = %v", r)
		}
		seen[r["id"].(string)] = true
		order = append(order, r["id"].(string))
	}
	if len(seen) != 100 {
		t.Fatalf("got %d distinct results", len(seen))
	}
	if order[0] == "h-0" {
		t.Errorf("results came in send order; want the shortest sleeps first")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("100 concurrent sleeps took %s", el)
	}
}

func TestPingIsAnsweredWhileHandlersRun(t *testing.T) {
	h := startSession(t, testAgent(WithMaxConcurrency(1)))
	h.handshake()
	h.task("h-1", "sleep", map[string]any{"MS": 1000})
	h.task("h-2", "sleep", map[string]any{"MS": 1000}) // queued behind h-1
	h.send(map[string]any{"type": "ping", "id": "p-1"})
	if f := h.recv(); f["type"] != "pong" || f["id"] != "p-1" {
		t.Fatalf("frame = %v, want pong", f)
	}
}

func TestCancelFrameCancelsTheContext(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "sleep", map[string]any{"MS": 10000})
	time.Sleep(50 * time.Millisecond)
	h.send(map[string]any{"type": "cancel", "id": "h-1", "reason": "user"})
	r := h.recv()
	if errCode(r) != CodeCancelled || !strings.Contains(r["error"].(map[string]any)["message"].(string), "user") {
		t.Fatalf("result = %v", r)
	}
	h.send(map[string]any{"type": "cancel", "id": "h-1"}) // late: dropped
	h.task("h-2", "echo", map[string]any{})
	if r := h.recv(); r["id"] != "h-2" {
		t.Fatalf("result = %v", r)
	}
}

func TestDeadlineCancelsWithTimeout(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "sleep", map[string]any{"MS": 10000}, "deadline_ms", "80") // int64 as a string, as protojson writes it
	if r := h.recv(); errCode(r) != CodeTimeout {
		t.Fatalf("result = %v", r)
	}
}

func TestErrorsMapToCodes(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "panic", nil)
	r := h.recv()
	data, _ := r["error"].(map[string]any)["data"].(map[string]any)
	if errCode(r) != CodeInternal || !strings.Contains(fmt.Sprint(data["traceback"]), "goroutine") {
		t.Fatalf("panic result = %v", r)
	}
	h.task("h-2", "plainerr", nil)
	if r := h.recv(); errCode(r) != CodeInternal || r["error"].(map[string]any)["message"] != "plain" {
		t.Fatalf("plain error result = %v", r)
	}
	h.task("h-3", "nope", nil)
	if r := h.recv(); errCode(r) != CodeUnknownAction {
		t.Fatalf("unknown action result = %v", r)
	}
	h.task("h-4", "sleep", map[string]any{"MS": "soon"})
	if r := h.recv(); errCode(r) != CodeInvalidParams {
		t.Fatalf("invalid params result = %v", r)
	}
}

func TestAnActionTakingAnyObjectStillRefusesParamsThatAreNotOne(t *testing.T) {
	// echo's schema is {"type":"object"}: params are checked for being an object, not walked.
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "echo", map[string]any{"a": []any{1.0, map[string]any{"b": nil}}})
	if r := h.recv(); r["status"] != "ok" || fmt.Sprint(r["result"]) != "map[a:[1 map[b:<nil>]]]" {
		t.Fatalf("object params result = %v", r)
	}
	h.task("h-2", "echo", []any{1, 2})
	if r := h.recv(); errCode(r) != CodeInvalidParams {
		t.Fatalf("array params result = %v", r)
	}
}

func TestPartialOutputCarriesErrorMetadataAndNextActions(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "partial", nil)
	r := h.recv()
	md := r["metadata"].(map[string]any)
	if r["status"] != "partial" || errCode(r) != "quota" || md["cost"] != 0.75 || md["model"] != "m1" || md["extra"].(map[string]any)["tokens"] != 12.0 {
		t.Fatalf("result = %v", r)
	}
	if na := r["next_actions"].([]any); len(na) != 1 || na[0].(map[string]any)["agent"] != "b" {
		t.Fatalf("next_actions = %v", r["next_actions"])
	}
}

func TestLogFramesCarryLevelFieldsAndTask(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "log", nil)
	f := h.recv()
	if f["type"] != "log" || f["level"] != "warning" || f["msg"] != "careful" || f["task_id"] != "h-1" {
		t.Fatalf("log frame = %v", f)
	}
	b, _ := json.Marshal(f["fields"])
	if string(b) != `{"a":1,"g":{"b":"two","h":{"c":3}}}` {
		t.Fatalf("fields = %s", b)
	}
	if r := h.recv(); r["type"] != "result" {
		t.Fatalf("frame = %v", r)
	}
}

func TestHostCallRoundTrip(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "call", nil, "deadline_ms", 5000)
	c := h.recv()
	p := c["params"].(map[string]any)
	if c["type"] != "call" || c["method"] != "agent.call" || c["task_id"] != "h-1" || !strings.HasPrefix(c["id"].(string), "a-") || p["agent"] != "other" || c["deadline_ms"].(float64) <= 0 {
		t.Fatalf("call = %v", c)
	}
	h.send(map[string]any{"type": "reply", "id": "a-999", "status": "ok"}) // unknown id: dropped
	h.send(map[string]any{"type": "reply", "id": c["id"], "status": "ok", "result": map[string]any{"data": 42}})
	if r := h.recv(); r["status"] != "ok" || r["result"].(map[string]any)["data"] != 42.0 {
		t.Fatalf("result = %v", r)
	}

	h.task("h-2", "call", nil)
	c = h.recv()
	h.send(map[string]any{"type": "reply", "id": c["id"], "status": "error", "error": map[string]any{"code": CodeCycleDetected, "message": "loop"}})
	if r := h.recv(); errCode(r) != CodeCycleDetected {
		t.Fatalf("result = %v", r)
	}

	h.task("h-3", "undeclared", nil)
	if r := h.recv(); errCode(r) != CodePermissionDenied {
		t.Fatalf("result = %v", r)
	}
}

func TestCancelledTaskCancelsItsHostCall(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "call", nil)
	c := h.recv()
	h.send(map[string]any{"type": "cancel", "id": "h-1"})
	f := h.recv()
	if f["type"] != "cancel" || f["id"] != c["id"] {
		t.Fatalf("frame = %v, want a cancel of %v", f, c["id"])
	}
	if r := h.recv(); errCode(r) != CodeCancelled {
		t.Fatalf("result = %v", r)
	}
}

func TestFramesOverMaxFrameFailOnlyTheirRequest(t *testing.T) {
	a := testAgent(WithMaxFrame(1 << 20))
	h := startSession(t, a)
	h.handshake()
	h.task("h-1", "big", map[string]any{"Bytes": 2 << 20})
	if r := h.recv(); errCode(r) != CodeFrameTooLarge {
		t.Fatalf("result = %v", r)
	}
	h.task("h-2", "echo", map[string]any{"pad": strings.Repeat("y", 2<<20)})
	if r := h.recv(); r["id"] != "h-2" || errCode(r) != CodeFrameTooLarge {
		t.Fatalf("result = %v", r)
	}
	h.task("h-3", "echo", map[string]any{"pad": strings.Repeat("z", 200<<10)}) // over 64 KiB, under the max
	if r := h.recv(); r["id"] != "h-3" || r["status"] != "ok" {
		t.Fatalf("result = %v", r)
	}
}

func TestNoiseLinesNeverBreakTheLink(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	for _, l := range []string{"\xff\xfe\xfd", "42", "[1,2]", `{"id":`, "", "plain text", `{"type":"mystery"}`} {
		h.sendLine([]byte(l))
	}
	h.in.Write([]byte(`{"type":"task","id":"h-1","action":"echo","params":{"x":1}}` + "\r\n"))
	if r := h.recv(); r["id"] != "h-1" || r["status"] != "ok" {
		t.Fatalf("result = %v", r)
	}
}

func TestShutdownFinishesInFlightAndRefusesNewTasks(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "sleep", map[string]any{"MS": 100})
	h.task("h-2", "sleep", map[string]any{"MS": 10000})
	h.send(map[string]any{"type": "shutdown", "grace_ms": 300, "reason": "test"})
	h.task("h-3", "echo", nil)
	got := map[string]string{}
	for range 3 {
		r := h.recv()
		got[r["id"].(string)] = fmt.Sprint(r["status"], "/", errCode(r))
	}
	want := map[string]string{"h-1": "ok/", "h-2": "error/cancelled", "h-3": "error/shutting_down"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results = %v, want %v", got, want)
	}
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestStdinEOFEndsTheSessionAfterInFlightTasks(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "sleep", map[string]any{"MS": 100})
	h.in.Close()
	if r := h.recv(); r["status"] != "ok" {
		t.Fatalf("result = %v", r)
	}
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestStubbornHandlerStillGetsOneResult(t *testing.T) {
	h := startSession(t, testAgent())
	h.handshake()
	h.task("h-1", "stubborn", nil)
	time.Sleep(50 * time.Millisecond) // let it start: a task cancelled before it starts never runs
	h.send(map[string]any{"type": "cancel", "id": "h-1"})
	if r := h.recv(); r["status"] != "ok" || r["result"] != "done anyway" {
		t.Fatalf("result = %v", r)
	}
}

func TestSeedEnvelopeTaskWithoutWelcome(t *testing.T) {
	a := New("plain")
	a.Action("run", funcHandler(func(p map[string]any) (any, error) { return p, nil }))
	h := startSession(t, a)
	h.recv() // hello
	h.send(map[string]any{"id": "h-1", "type": "task", "payload": map[string]any{"a": 1}})
	r := h.recv()
	if r["id"] != "h-1" || r["status"] != "ok" || r["result"].(map[string]any)["a"] != 1.0 {
		t.Fatalf("result = %v", r)
	}
}

func TestSetupErrorIsFatal(t *testing.T) {
	var got atomic.Value
	a := New("s", WithSetup(func(_ context.Context, cfg json.RawMessage) error {
		got.Store(string(cfg))
		return Errorf("missing_secret", "set API_KEY")
	}))
	h := startSession(t, a)
	h.handshake()
	if f := h.recv(); f["type"] != "fatal" || f["code"] != "missing_secret" {
		t.Fatalf("frame = %v", f)
	}
	if err := h.wait(); CodeOf(err) != "missing_secret" || got.Load() != `{"k":"v"}` {
		t.Fatalf("err = %v, config = %v", err, got.Load())
	}
}

func TestSchemaValidationRefusesBadParamsBeforeTheHandler(t *testing.T) {
	type P struct {
		MS   int      `json:"ms" agent:"required"`
		Tags []string `json:"tags,omitempty"`
	}
	ran := false
	a := New("v")
	a.Action("sleep", Typed(func(_ context.Context, _ *Task, p P) (any, error) { ran = true; return p.MS, nil }), SchemaOf[P]())
	h := startSession(t, a)
	hello := h.handshake()
	schema, _ := json.Marshal(hello["actions"].([]any)[0].(map[string]any)["params_schema"])
	if string(schema) != `{"properties":{"ms":{"type":"integer"},"tags":{"items":{"type":"string"},"type":"array"}},"required":["ms"],"type":"object"}` {
		t.Fatalf("schema = %s", schema)
	}
	for i, params := range []any{map[string]any{"ms": "soon"}, map[string]any{}, map[string]any{"ms": 1.5}, map[string]any{"ms": 1, "tags": []any{2}}} {
		h.task(fmt.Sprint("h-", i), "sleep", params)
		if r := h.recv(); errCode(r) != CodeInvalidParams {
			t.Fatalf("params %v: result = %v", params, r)
		}
	}
	h.task("h-ok", "sleep", map[string]any{"ms": 2.0})
	if r := h.recv(); r["status"] != "ok" || r["result"] != 2.0 || !ran {
		t.Fatalf("result = %v", r)
	}
}

func TestOnlyTheShapeIsCheckedTheRestIsTheHosts(t *testing.T) {
	schema := map[string]any{}
	_ = json.Unmarshal([]byte(`{"type":"object","required":["n"],"additionalProperties":false,"properties":{
		"n":{"type":"integer","minimum":0,"maximum":1},"s":{"type":"string","maxLength":1,"pattern":"^a$"},
		"e":{"enum":["red"]},"c":{"const":1},"o":{"oneOf":[{"type":"integer"},{"type":"number"}]},
		"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`), &schema)
	check := func(params string) []string {
		return paramsCheck{schema: schema}.validateParams(json.RawMessage(params))
	}
	if got := check(`{"n":7,"s":"bbb","e":"blue","c":true,"o":3,"x":1,"m":{"a":1}}`); len(got) != 0 {
		t.Fatalf("keywords other than type and required were checked: %v", got)
	}
	got := check(`{"n":1.5,"m":{"b":2,"a":"1"}}`)
	want := []string{"params.m.a: expected integer, got string", "params.n: expected integer, got number"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problems = %v, want %v", got, want)
	}
	if got := check(`{}`); fmt.Sprint(got) != "[params.n: is required]" {
		t.Fatalf("problems = %v", got)
	}
}

func TestHandlersIgnoringShutdownStillGetOneResult(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	a := New("deaf")
	a.Action("deaf", func(context.Context, *Task) (any, error) { <-release; return "late", nil })
	h := startSession(t, a)
	h.handshake()
	h.task("h-1", "deaf", nil)
	time.Sleep(50 * time.Millisecond)
	h.send(map[string]any{"type": "shutdown", "grace_ms": 100})
	if r := h.recv(); r["id"] != "h-1" || errCode(r) != CodeCancelled {
		t.Fatalf("result = %v", r)
	}
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
}

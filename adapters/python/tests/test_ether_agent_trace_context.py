"""The task's W3C trace context: visible to handlers, carried by the calls they make."""

from __future__ import annotations

from typing import Any

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TASK_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{TASK_SPAN}-01"
TRACESTATE = "ether=t61rcWkgMzE,vendor=x"

RELAY = """
    import sys
    from ether_agent import Agent
    agent = Agent("t", calls=["agent.call"])

    @agent.action
    async def relay(ctx, explicit: str = ""):
        out = await ctx.call_agent("other", "echo", {}, trace_parent=explicit or None)
        return {
            "parent": ctx.trace_parent,
            "state": ctx.trace_state,
            "reply": out,
            "otel_loaded": "opentelemetry" in sys.modules,
        }
    """


def _relay(
    child: Any, tid: str, extra: dict[str, Any], params: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one relay task; return its call frame and its result."""
    child.send({"type": "task", "id": tid, "action": "relay", "params": params or {}, **extra})
    call = child.read(skip=("log",))
    assert call["type"] == "call", call
    child.send({"type": "reply", "id": call["id"], "status": "ok", "result": {"data": 1}})
    result = child.read(skip=("log",))
    assert result["type"] == "result" and result["status"] == "ok", result
    return call, result["result"]


def test_handler_sees_the_task_trace_context_and_its_calls_carry_it(agent: Any) -> None:
    """A traced task's traceparent and tracestate reach ctx and go out on its host calls; the
    SDK does not import OpenTelemetry on its own."""
    child = agent(RELAY)
    call, out = _relay(child, "h-1", {"traceparent": TRACEPARENT, "tracestate": TRACESTATE})
    assert call["traceparent"] == TRACEPARENT
    assert call["tracestate"] == TRACESTATE
    assert out["parent"] == TRACEPARENT
    assert out["state"] == TRACESTATE
    assert out["otel_loaded"] is False
    assert child.close() == 0


def test_an_untraced_task_sends_calls_without_trace_context(agent: Any) -> None:
    """No traceparent on the task: ctx says None and the call frame has neither key."""
    child = agent(RELAY)
    call, out = _relay(child, "h-1", {})
    assert "traceparent" not in call and "tracestate" not in call
    assert out["parent"] is None and out["state"] is None
    assert child.close() == 0


def test_an_explicit_traceparent_overrides_the_tasks(agent: Any) -> None:
    """trace_parent= on a call is what the call frame carries (without the task's tracestate)."""
    child = agent(RELAY)
    mine = f"00-{TRACE_ID}-1111111111111111-01"
    call, out = _relay(
        child, "h-1", {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}, {"explicit": mine}
    )
    assert call["traceparent"] == mine
    assert "tracestate" not in call
    assert out["parent"] == TRACEPARENT
    assert child.close() == 0


def test_a_malformed_traceparent_is_dropped_and_never_breaks_the_task(agent: Any) -> None:
    """What is not a W3C traceparent reads as None (its tracestate too) and is not passed on."""
    child = agent(RELAY)
    bad = [
        "garbage",
        123,
        {"x": 1},
        f"00-{TRACE_ID.upper()}-{TASK_SPAN}-01",  # W3C: lowercase hex only
        f"ff-{TRACE_ID}-{TASK_SPAN}-01",  # version ff is invalid
        f"00-{'0' * 32}-{TASK_SPAN}-01",  # all-zero trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # all-zero span id
        f"00-{TRACE_ID}-{TASK_SPAN}-01-extra",  # version 00 has exactly four fields
    ]
    for n, value in enumerate(bad):
        call, out = _relay(child, f"h-{n}", {"traceparent": value, "tracestate": TRACESTATE})
        assert "traceparent" not in call and "tracestate" not in call, value
        assert out["parent"] is None and out["state"] is None, value
    # A later version may add fields; its first four are read as level 1's.
    future = f"01-{TRACE_ID}-{TASK_SPAN}-01-more"
    call, out = _relay(child, "h-future", {"traceparent": future})
    assert call["traceparent"] == future and out["parent"] == future
    assert child.close() == 0


OTEL_AGENT = """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    from ether_agent import Agent

    agent = Agent("t", calls=["agent.call"])
    tracer = TracerProvider().get_tracer("test-agent")

    def parent_of(ctx):
        return TraceContextTextMapPropagator().extract(
            {"traceparent": ctx.trace_parent, "tracestate": ctx.trace_state or ""}
        )

    def ids(span):
        c = span.get_span_context()
        return {"trace_id": f"{c.trace_id:032x}", "span_id": f"{c.span_id:016x}"}

    @agent.action
    async def traced(ctx):
        with tracer.start_as_current_span("agent-work", context=parent_of(ctx)) as span:
            await ctx.call_agent("other", "echo", {})
            return ids(span)

    @agent.action
    async def spanless(ctx):
        await ctx.call_agent("other", "echo", {})
        return {}

    @agent.action
    def traced_sync(ctx):
        with tracer.start_as_current_span("agent-work", context=parent_of(ctx)) as span:
            ctx.call_agent_sync("other", "echo", {})
            return ids(span)
    """


def test_a_call_inside_an_opentelemetry_span_carries_that_span(agent: Any) -> None:
    """An agent that opens its own span (OpenTelemetry API, parented on ctx.trace_parent) makes
    calls whose traceparent is that span's: in async handlers and in sync ones (worker threads)."""
    child = agent(OTEL_AGENT)
    for n, action in enumerate(["traced", "traced_sync"]):
        child.send(
            {
                "type": "task",
                "id": f"h-{n}",
                "action": action,
                "params": {},
                "traceparent": TRACEPARENT,
                "tracestate": TRACESTATE,
            }
        )
        call = child.read(skip=("log",))
        child.send({"type": "reply", "id": call["id"], "status": "ok", "result": {"data": 1}})
        span = child.read(skip=("log",))["result"]
        assert span["trace_id"] == TRACE_ID, action  # the agent's span continues the task's trace
        assert span["span_id"] != TASK_SPAN, action
        assert call["traceparent"] == f"00-{TRACE_ID}-{span['span_id']}-01", action
        assert call["tracestate"] == TRACESTATE, action
    # OpenTelemetry imported but no span open: the call carries the task's own context.
    child.send(
        {
            "type": "task",
            "id": "h-spanless",
            "action": "spanless",
            "params": {},
            "traceparent": TRACEPARENT,
            "tracestate": TRACESTATE,
        }
    )
    call = child.read(skip=("log",))
    assert call["traceparent"] == TRACEPARENT and call["tracestate"] == TRACESTATE
    child.send({"type": "reply", "id": call["id"], "status": "ok", "result": {"data": 1}})
    assert child.read(skip=("log",))["status"] == "ok"
    assert child.close() == 0

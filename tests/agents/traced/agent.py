"""Makes a span of its own with the OpenTelemetry API under the task's span (ctx.trace_parent),
exports it over OTLP to the endpoint in its params, and calls another agent inside it: the
tracing tests' agent (tests/host/test_tracing.py). It also writes to stderr while it works."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ether_agent import Agent, TaskContext

agent = Agent(
    "traced",
    version="1.0.0",
    description="Test agent with spans of its own.",
    calls=["agent.call"],
)
_providers: dict[str, TracerProvider] = {}


def _provider(endpoint: str) -> TracerProvider:
    if endpoint not in _providers:
        provider = TracerProvider(resource=Resource.create({"service.name": "traced-agent"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
        )
        _providers[endpoint] = provider
    return _providers[endpoint]


@agent.action(description="Open a span under the task's, call noisy.echo inside it.")
async def work(endpoint: str, ctx: TaskContext) -> dict[str, Any]:
    carrier = {"traceparent": ctx.trace_parent} if ctx.trace_parent else {}
    parent = TraceContextTextMapPropagator().extract(carrier)
    tracer = _provider(endpoint).get_tracer("traced-agent")
    with tracer.start_as_current_span("traced.own_work", context=parent) as span:
        # The SDK's call frame carries this span's traceparent (the current OpenTelemetry span).
        echoed = await ctx.call_agent("noisy", "echo", {"from": "traced"})
        span.set_attribute("echoed", echoed.get("status", ""))
    return {"trace_parent": ctx.trace_parent or "", "echoed": echoed.get("status")}


_arrived: dict[str, int] = {}
_together: dict[str, asyncio.Event] = {}


@agent.action(description="Once `together` tasks of `group` run, write `text` to stderr.")
async def say(text: str, ctx: TaskContext, group: str = "", together: int = 1) -> dict[str, Any]:
    # Every task of the group is in flight before any writes: the lines are written with all
    # of them running.
    _arrived[group] = _arrived.get(group, 0) + 1
    event = _together.setdefault(group, asyncio.Event())
    if _arrived[group] >= together:
        event.set()
    await event.wait()
    ctx.log.info(f"{text} (frame)")  # a log frame: it names its task itself
    sys.stderr.write(f"INFO: {text}\n")
    sys.stderr.flush()
    # A round trip through the host before the result: the host has read the line (written
    # before the call frame) while this task is still in flight.
    await ctx.call_agent("noisy", "echo", {})
    return {"said": text, "trace_parent": ctx.trace_parent or ""}


if __name__ == "__main__":
    agent.run()

"""Claims of the SDK READMEs (adapters/python/README.md, adapters/go/README.md,
adapters/typescript/README.md) that no other test held, as an agent author sees them: one small
agent per language, written into the test's tmp folder from the sources below, built and run by a
real host and called over gRPC. Each README promises the same, so most tests run once per language.

- Python "TaskContext" / Go "API" (t.TaskID, t.Attempt, t.Deadline, t.Budget, t.Config()) /
  TypeScript "API" (ctx): the handler sees the client's task id, the attempt, the budget, the
  deadline and the deployment's config (Python `@agent.on_start` and Go `WithSetup` get it too).
- "Results" / `AgentError` / `*agent.Error` (also wrapped): a coded error reaches the caller with
  its code, message, data and retryable flag.
- Any other exception, a thrown Error, a Go panic: `internal` with `data.traceback`; a panic
  "never crashes the agent" (nor does an exception).
- `ctx.cost` / `t.Cost` (adds up), the model, `extra` / `SetExtra`, `Output(next_actions=...)`:
  the output's metadata and next_actions. `Partial` / `Output.Partial` / `Output.partial`: status
  partial with its data and error.
- `progress(done, total, message)` and `log.info/warning/error` (`warn`, a `*slog.Logger`
  whose groups become nested fields): ExecuteStream's progress and log events.
- "Host call methods must be declared" / "undeclared methods fail permission_denied locally" /
  "Host calls reject with it (code from the reply)": an undeclared call and one the deployment
  does not grant both read `permission_denied` in the handler.
- `call_agent` / `CallAgent` / `callAgent` (agent.call): the sub-task's AgentOutput, value in
  `data`, a failed sub-task as its output; an error reply (no such agent) raises `not_found`.
- Cancellation: `ctx.cancelled` (a sync Python handler), `ctx.signal` (its reason an AgentError
  `cancelled`), Go's ctx: a CancelTask reaches the running handler.
- Python "Params schema" (Literal, enums, Annotated, defaults, `**kwargs`) and Go `SchemaOf[P]`
  with `agent:"required"`: the schema GetAgent shows, and that the host enforces.
- "Lifecycle hooks": `FatalError` in `on_start`, an error from `WithSetup`: FATAL, never restarted.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, watch_until
from tests.support.calls import agent_input, budget, data, details, execute, struct
from tests.support.host import ROOT, HostProcess

LANGUAGES = ("py", "go", "ts")
CONFIG = {"colour": "blue"}

PYTHON_AGENT = r'''"""The Python SDK's README, action by action (tests/agents/test_sdk_doc_claims.py)."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from ether_agent import Agent, AgentError, FatalError, NextAction, Output, Partial, TaskContext

agent = Agent(
    "sdkpy", version="1.0.0", description="The SDK README's claims.", max_concurrency=4,
    calls=["agent.call", "net.fetch"],
)
started: dict[str, Any] = {}


@agent.on_start
def start(config: dict[str, Any]) -> None:
    if config.get("refuse"):
        raise FatalError("fatal_config", f"refused: {config['refuse']}")
    started["config"] = config


@agent.action
def facts(params: dict, ctx: TaskContext) -> dict:
    left = ctx.remaining()
    return {
        "task_id": ctx.task_id, "attempt": ctx.attempt, "config": ctx.config,
        "budget": ctx.budget, "remaining_s": left, "started_with": started.get("config"),
    }


@agent.action
def fail(params: dict, ctx: TaskContext) -> dict:
    raise AgentError("out_of_stock", "no more widgets", {"sku": "w-1"}, retryable=True)


@agent.action
def crash(params: dict, ctx: TaskContext) -> dict:
    raise RuntimeError("boom-py")


@agent.action
def report(params: dict, ctx: TaskContext) -> Output:
    ctx.cost(0.25, model="m-1", tokens=7)
    ctx.cost(0.5)
    follow = NextAction("sdk-py", "facts", {"n": 1}, reason="check")
    return Output({"ok": True}, next_actions=[follow])


@agent.action
def partial(params: dict, ctx: TaskContext) -> Output:
    return Partial({"rows": 3}, AgentError("truncated", "3 of 10 rows"))


@agent.action
async def chatty(params: dict, ctx: TaskContext) -> dict:
    ctx.progress(1, 2, "half")
    ctx.log.info("hello", n=1)
    ctx.log.warning("careful", req={"id": 7})
    ctx.log.error("bad")
    ctx.progress(2, 2, "done")
    return {"ok": True}


async def _code(call: Any) -> str:
    try:
        await call
    except AgentError as error:
        return error.code
    return "no error"


@agent.action
async def denied(params: dict, ctx: TaskContext) -> dict:
    return {
        "undeclared": await _code(ctx.host_call("msg.send", {"to": "agent:x", "type": "t"})),
        "ungranted": await _code(ctx.host_call("net.fetch", {"url": "http://127.0.0.1:9/"})),
    }


@agent.action
async def relay(target: str, action: str, ctx: TaskContext) -> dict:
    try:
        out = await ctx.call_agent(target, action, {})
    except AgentError as error:
        return {"raised": error.code}
    return {"status": out["status"], "data": out.get("data")}


@agent.action
def wait(params: dict, ctx: TaskContext) -> dict:  # sync: a thread of the pool
    ctx.progress(0, 1, "waiting")
    seen = ctx.cancelled.wait(120)
    print(f"cancel-seen:{ctx.task_id}:{'cancelled' if seen else 'never'}", flush=True)
    return {"seen": seen}


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


@agent.action
def pick(
    color: Literal["red", "green"],
    size: Size,
    note: Annotated[str, "a note for the picker"] = "",
) -> dict:
    return {"color": color, "size": size.value if isinstance(size, Size) else size, "note": note}


@agent.action
def loose(name: str, **rest: Any) -> dict:
    return {"name": name, "rest": rest}
'''

GO_AGENT = r"""// Command sdkgo: the Go adapter's README, action by action
// (tests/agents/test_sdk_doc_claims.py).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

type relayParams struct {
	Target string `json:"target" agent:"required"`
	Action string `json:"action" agent:"required"`
}

type typedParams struct {
	Name  string `json:"name" agent:"required"`
	Count int    `json:"count"`
}

var started json.RawMessage

func facts(_ context.Context, t *agent.Task) (any, error) {
	var left any
	if !t.Deadline.IsZero() {
		left = time.Until(t.Deadline).Seconds()
	}
	return map[string]any{
		"task_id": t.TaskID, "attempt": t.Attempt, "config": t.Config(),
		"budget": t.Budget, "remaining_s": left, "started_with": started,
	}, nil
}

func fail(_ context.Context, _ *agent.Task) (any, error) {
	coded := &agent.Error{Code: "out_of_stock", Message: "no more widgets", Data: map[string]any{"sku": "w-1"}, Retryable: true}
	return nil, fmt.Errorf("checking stock: %w", coded)
}

func crash(_ context.Context, _ *agent.Task) (any, error) {
	panic("boom-go")
}

func report(_ context.Context, t *agent.Task) (any, error) {
	t.Cost(0.25, "m-1")
	t.Cost(0.5, "")
	t.SetExtra("tokens", 7)
	follow := agent.NextAction{Agent: "sdk-go", Action: "facts", Params: map[string]any{"n": 1}, Reason: "check"}
	return agent.Output{Data: map[string]any{"ok": true}, NextActions: []agent.NextAction{follow}}, nil
}

func partial(_ context.Context, _ *agent.Task) (any, error) {
	return agent.Output{Data: map[string]any{"rows": 3}, Partial: true, Err: agent.Errorf("truncated", "3 of 10 rows")}, nil
}

func chatty(_ context.Context, t *agent.Task) (any, error) {
	t.Progress(1, 2, "half")
	t.Log().Info("hello", "n", 1)
	t.Log().WithGroup("req").Warn("careful", "id", 7)
	t.Log().Error("bad")
	t.Progress(2, 2, "done")
	return map[string]any{"ok": true}, nil
}

func denied(ctx context.Context, t *agent.Task) (any, error) {
	_, undeclared := t.HostCall(ctx, "msg.send", map[string]any{"to": "agent:x", "type": "t"})
	_, ungranted := t.HostCall(ctx, "net.fetch", map[string]any{"url": "http://127.0.0.1:9/"})
	return map[string]any{"undeclared": agent.CodeOf(undeclared), "ungranted": agent.CodeOf(ungranted)}, nil
}

func relay(ctx context.Context, t *agent.Task, p relayParams) (any, error) {
	raw, err := t.CallAgent(ctx, p.Target, p.Action, nil)
	if err != nil {
		return map[string]any{"raised": agent.CodeOf(err)}, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return map[string]any{"status": out["status"], "data": out["data"]}, nil
}

func wait(ctx context.Context, t *agent.Task) (any, error) {
	t.Progress(0, 1, "waiting")
	<-ctx.Done()
	fmt.Println("cancel-seen:" + t.TaskID + ":" + agent.CodeOf(ctx.Err()))
	return nil, ctx.Err()
}

func typed(_ context.Context, _ *agent.Task, p typedParams) (any, error) {
	return map[string]any{"name": p.Name, "count": p.Count}, nil
}

func main() {
	a := agent.New("sdkgo", agent.WithVersion("1.0.0"), agent.WithMaxConcurrency(4),
		agent.WithCalls("agent.call", "net.fetch"),
		agent.WithSetup(func(_ context.Context, config json.RawMessage) error {
			var c map[string]any
			_ = json.Unmarshal(config, &c)
			if refuse, ok := c["refuse"]; ok {
				return fmt.Errorf("refused: %v", refuse)
			}
			started = config
			return nil
		}))
	a.Action("facts", facts)
	a.Action("fail", fail)
	a.Action("crash", crash)
	a.Action("report", report)
	a.Action("partial", partial)
	a.Action("chatty", chatty)
	a.Action("denied", denied)
	a.Action("relay", agent.Typed(relay), agent.SchemaOf[relayParams]())
	a.Action("wait", wait)
	a.Action("typed", agent.Typed(typed), agent.SchemaOf[typedParams]())
	a.Serve()
}
"""

TS_AGENT = r"""// sdkts: the TypeScript adapter's README, action by action (tests/agents/test_sdk_doc_claims.py).
import { Agent, AgentError, Output, type Context } from "@ether/agent";

const agent = new Agent({
  name: "sdkts",
  version: "1.0.0",
  maxConcurrency: 4,
  calls: ["agent.call", "net.fetch"],
});

agent.action("facts", { description: "The task's facts as the handler sees them." }, (_params, ctx) => ({
  task_id: ctx.taskId,
  attempt: ctx.attempt,
  config: ctx.config,
  budget: ctx.budget,
  remaining_s: ctx.deadline === undefined ? null : (ctx.deadline.getTime() - Date.now()) / 1000,
  started_with: null,
}));

agent.action("fail", { description: "A coded error." }, () => {
  throw new AgentError("out_of_stock", "no more widgets", { details: { sku: "w-1" }, retryable: true });
});

agent.action("crash", { description: "An uncaught error." }, function crash(): never {
  throw new Error("boom-ts");
});

agent.action("report", { description: "Cost, model, extra and next actions." }, (_params, ctx) => {
  ctx.cost(0.25, "m-1");
  ctx.cost(0.5);
  return new Output(
    { ok: true },
    { nextActions: [{ agent: "sdk-ts", action: "facts", params: { n: 1 }, reason: "check" }], extra: { tokens: 7 } },
  );
});

agent.action("partial", { description: "A partial result." }, () =>
  Output.partial({ rows: 3 }, new AgentError("truncated", "3 of 10 rows")),
);

agent.action("chatty", { description: "Progress and logs." }, (_params, ctx) => {
  ctx.progress(1, 2, "half");
  ctx.log.info("hello", { n: 1 });
  ctx.log.warn("careful", { req: { id: 7 } });
  ctx.log.error("bad");
  ctx.progress(2, 2, "done");
  return { ok: true };
});

async function code(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (error) {
    return error instanceof AgentError ? error.code : `not an AgentError: ${String(error)}`;
  }
  return "no error";
}

agent.action("denied", { description: "Host calls refused." }, async (_params, ctx: Context) => ({
  undeclared: await code(ctx.hostCall("msg.send", { to: "agent:x", type: "t" })),
  ungranted: await code(ctx.hostCall("net.fetch", { url: "http://127.0.0.1:9/" })),
}));

agent.action(
  "relay",
  { description: "agent.call through the host.", schema: { type: "object", required: ["target", "action"] } },
  async ({ target, action }: { target: string; action: string }, ctx) => {
    try {
      const out = await ctx.callAgent<{ status: string; data?: unknown }>(target, action, {});
      return { status: out.status, data: out.data ?? null };
    } catch (error) {
      if (error instanceof AgentError) return { raised: error.code };
      throw error;
    }
  },
);

agent.action("wait", { description: "Wait until cancelled." }, async (_params, ctx) => {
  ctx.progress(0, 1, "waiting");
  await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
  const reason: unknown = ctx.signal.reason;
  console.log(`cancel-seen:${ctx.taskId}:${reason instanceof AgentError ? reason.code : String(reason)}`);
  throw reason;
});

await agent.serve();
"""

GO_MOD = """module example.com/sdkgo

go 1.24

require github.com/etherhost/ether/adapters/go v0.0.0

replace github.com/etherhost/ether/adapters/go => ../../../adapters/go
"""


def write_agents(root: Path) -> dict[str, Path]:
    """The three agents' folders, laid out as in the repository (the Go replace and the npm
    file: dependency both name ../../../adapters)."""
    (root / "adapters").symlink_to(ROOT / "adapters")
    folders = {lang: root / "tests" / "agents" / f"sdk_{lang}" for lang in LANGUAGES}
    for lang, language in (("py", "python"), ("go", "go"), ("ts", "typescript")):
        folders[lang].mkdir(parents=True)
        (folders[lang] / "agent.toml").write_text(f'language = "{language}"\n')
    (folders["py"] / "agent.py").write_text(PYTHON_AGENT)
    (folders["go"] / "go.mod").write_text(GO_MOD)
    (folders["go"] / "main.go").write_text(GO_AGENT)
    for name in ("package.json", "package-lock.json", "tsconfig.json"):  # its file: dependency
        shutil.copy(AGENTS / "ts_prober" / name, folders["ts"] / name)
    (folders["ts"] / "src").mkdir()
    (folders["ts"] / "src" / "agent.ts").write_text(TS_AGENT)
    return folders


@pytest.fixture(scope="module")
def folders(host: HostProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The agents deployed as sdk-py, sdk-go and sdk-ts, with CONFIG as their config."""
    found = write_agents(tmp_path_factory.mktemp("sdk"))
    for lang, folder in found.items():
        deploy(host, folder, name=f"sdk-{lang}", config=struct(CONFIG))
    return found


def run(host: HostProcess, lang: str, action: str, /, **params: Any) -> agent_io_pb2.AgentOutput:
    return execute(host, f"sdk-{lang}", action, params, timeout=60)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_handler_sees_its_task_budget_deadline_and_config(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """task_id is the client's id, attempt 1, the budget's max_cost, the time left of the
    RPC's deadline, and config the deployment's config; Python's on_start and Go's WithSetup
    were handed the same config."""
    task_id = f"facts-{lang}"
    output = execute(
        host,
        f"sdk-{lang}",
        "facts",
        {},
        timeout=30,
        task_id=task_id,
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=2.5)),
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    facts = data(output)
    assert (facts["task_id"], facts["attempt"]) == (task_id, 1)
    assert facts["config"] == CONFIG
    assert facts["budget"]["max_cost"] == pytest.approx(2.5)
    assert facts["remaining_s"] is not None and 0 < facts["remaining_s"] <= 31
    if lang != "ts":  # the TypeScript adapter has no start hook
        assert facts["started_with"] == CONFIG


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_coded_error_reaches_the_caller_with_its_data_and_retryable(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """AgentError(code, message, data, retryable=True) (Go: an *agent.Error wrapped with %w;
    TypeScript: details): an ERROR output with that code, message, details and retryable."""
    output = run(host, lang, "fail")
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    error = output.error
    assert (error.code, error.message) == ("out_of_stock", "no more widgets")
    assert dict(error.details) == {"sku": "w-1"}
    assert error.retryable


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_uncaught_error_is_internal_with_a_traceback_and_the_agent_lives_on(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """An exception, a thrown Error or a Go panic: `internal`, the message naming it and the
    stack (naming the handler) in details.traceback; the same process answers the next task."""
    crashed = run(host, lang, "crash")
    assert crashed.status == agent_io_pb2.TASK_STATUS_ERROR
    assert crashed.error.code == "internal"
    assert f"boom-{lang}" in crashed.error.message
    assert "crash" in str(crashed.error.details["traceback"])
    after = run(host, lang, "facts")
    assert after.status == agent_io_pb2.TASK_STATUS_SUCCESS, after.error
    assert after.metadata.pid == crashed.metadata.pid


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cost_model_extra_and_next_actions_reach_the_output(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """cost(0.25, model) then cost(0.5) add up to 0.75 with the model kept; tokens=7 (Python's
    cost extra, Go's SetExtra, TypeScript's Output extra) is metadata.extra; the proposed next
    action comes back whole."""
    output = run(host, lang, "report")
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert data(output) == {"ok": True}
    assert output.metadata.cost == pytest.approx(0.75)
    assert output.metadata.model == "m-1"
    assert dict(output.metadata.extra) == {"tokens": 7}
    [proposed] = output.next_actions
    assert (proposed.agent, proposed.action, proposed.reason) == (f"sdk-{lang}", "facts", "check")
    assert dict(proposed.params) == {"n": 1}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_partial_result_carries_its_data_and_its_error(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """Partial(data, error) / Output{Partial: true} / Output.partial: status PARTIAL, both."""
    output = run(host, lang, "partial")
    assert output.status == agent_io_pb2.TASK_STATUS_PARTIAL
    assert data(output) == {"rows": 3}
    assert (output.error.code, output.error.message) == ("truncated", "3 of 10 rows")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_progress_and_log_records_stream_to_the_caller(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """progress(done, total, message) and log.info/warning(warn, slog's Warn)/error with fields
    are ExecuteStream events in order, levels named info, warning, error; a Go slog group and a
    nested field read the same."""
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input(f"sdk-{lang}", "chatty"))
    events = list(host.agents.ExecuteStream(request, timeout=60))
    assert events[-1].output.status == agent_io_pb2.TASK_STATUS_SUCCESS, events[-1].output.error
    seen: list[tuple[Any, ...]] = []
    for event in events:
        if event.WhichOneof("event") == "progress":
            seen.append(("progress", event.progress.progress, event.progress.total))
            seen.append(("message", event.progress.message))
        elif event.WhichOneof("event") == "log":
            fields = data(agent_io_pb2.AgentOutput(data={"struct_value": event.log.fields}))
            seen.append((event.log.level, event.log.message, fields))
    assert seen == [
        ("progress", 1, 2),
        ("message", "half"),
        ("info", "hello", {"n": 1}),
        ("warning", "careful", {"req": {"id": 7}}),
        ("error", "bad", {}),
        ("progress", 2, 2),
        ("message", "done"),
    ]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_refused_host_calls_read_permission_denied_in_the_handler(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """msg.send, never declared, fails in the SDK; net.fetch, declared but not granted by the
    deployment (its calls default to agent.call), fails at the host: both reach the handler as
    the SDK's error with code permission_denied."""
    output = run(host, lang, "denied")
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert data(output) == {"undeclared": "permission_denied", "ungranted": "permission_denied"}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_call_agent_returns_the_sub_tasks_output_and_raises_on_an_error_reply(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """agent.call through the SDK: the sub-task's AgentOutput with its value in `data` (a failed
    sub-task is an output too, status ERROR); a call the host answers with an error (no such
    agent) raises the SDK's error with the reply's code, not_found. The host writes the status
    as the examples read it ("SUCCESS"; tests/conformance's stand-in host writes the proto3
    JSON name "TASK_STATUS_SUCCESS" instead)."""
    name = f"sdk-{lang}"
    called = data(run(host, lang, "relay", target=name, action="facts"))
    assert called["status"] == "SUCCESS"
    assert called["data"]["config"] == CONFIG
    failed = data(run(host, lang, "relay", target=name, action="fail"))
    assert failed["status"] == "ERROR"
    assert data(run(host, lang, "relay", target="nobody", action="facts")) == {
        "raised": "not_found"
    }


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cancel_task_reaches_the_running_handler(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """A handler waiting on ctx.cancelled (Python, in a worker thread), ctx.signal (TypeScript:
    its reason an AgentError `cancelled`) or ctx.Done() (Go: CodeOf says cancelled) wakes when
    the task is cancelled; it says so on stdout, which the SDKs send to the agent's log, and
    its process goes on (the host restarts one that ignores a cancel)."""
    name, task_id = f"sdk-{lang}", f"wait-{lang}"
    stream = host.agents.ExecuteStream(
        agent_io_pb2.ExecuteStreamRequest(input=agent_input(name, "wait", task_id=task_id)),
        timeout=60,
    )
    started = next(stream)
    assert started.WhichOneof("event") == "started"
    assert next(stream).progress.message == "waiting"  # the handler runs
    cancel = agent_io_pb2.CancelTaskRequest(task_id=task_id, reason="test")
    assert host.agents.CancelTask(cancel, timeout=10).cancelled
    with pytest.raises(grpc.RpcError) as error:
        list(stream)
    assert error.value.code() == grpc.StatusCode.CANCELLED
    logs = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=name, tail_lines=1000, follow=True), timeout=30
    )
    try:
        line = next(r.message for r in logs if f"cancel-seen:{task_id}" in r.message)
    finally:
        logs.cancel()
    assert line.strip() == f"cancel-seen:{task_id}:cancelled"
    # Woken by the cancel itself, not by the restart of a process that ignored it.
    assert run(host, lang, "facts").metadata.pid == started.started.pid


def refusal(host: HostProcess, agent: str, action: str, params: dict[str, Any]) -> list[str]:
    """The fields the host names when it refuses ``params`` before dispatch."""
    with pytest.raises(grpc.RpcError) as caught:
        output = execute(host, agent, action, params)
        pytest.fail(f"{agent}.{action} ran with {params}: {output}")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    found = details(caught.value)
    assert found["ErrorInfo"].reason == "INVALID_PARAMS"
    return [v.field for v in found["BadRequest"].field_violations]


def schema_of(host: HostProcess, agent: str, action: str) -> dict[str, Any]:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=10).agent
    [found] = [a for a in info.actions if a.name == action]
    schema: dict[str, Any] = data(
        agent_io_pb2.AgentOutput(data={"struct_value": found.params_schema})
    )
    return schema


def test_python_type_hints_are_the_schema_the_host_enforces(
    host: HostProcess, folders: dict[str, Path]
) -> None:
    """pick(color: Literal[...], size: an Enum, note: Annotated[str, "..."] = ""): GetAgent shows
    the enums, the description and color and size required; the host refuses a colour outside
    the Literal, a missing size and an unknown param; note may be left out. loose(name,
    **rest) takes unknown params and gets them."""
    schema = schema_of(host, "sdk-py", "pick")
    assert schema["properties"]["color"]["enum"] == ["red", "green"]
    assert schema["properties"]["size"]["enum"] == ["small", "large"]
    assert schema["properties"]["note"]["description"] == "a note for the picker"
    assert sorted(schema["required"]) == ["color", "size"]
    assert "input.params.color" in refusal(
        host, "sdk-py", "pick", {"color": "blue", "size": "small"}
    )
    assert refusal(host, "sdk-py", "pick", {"color": "red"})
    assert refusal(host, "sdk-py", "pick", {"color": "red", "size": "small", "shade": 1})
    picked = data(run(host, "py", "pick", color="green", size="large"))
    assert picked == {"color": "green", "size": "large", "note": ""}
    assert data(run(host, "py", "loose", name="n", shade=1)) == {"name": "n", "rest": {"shade": 1}}


def test_go_schema_of_a_struct_is_the_schema_the_host_enforces(
    host: HostProcess, folders: dict[str, Path]
) -> None:
    """SchemaOf[P] with `agent:"required"`: GetAgent shows name required and count an integer;
    the host refuses params without name or with a string count; Typed decodes the rest."""
    schema = schema_of(host, "sdk-go", "typed")
    assert schema["required"] == ["name"]
    assert schema["properties"]["count"]["type"] == "integer"
    assert refusal(host, "sdk-go", "typed", {"count": 1})
    assert "input.params.count" in refusal(host, "sdk-go", "typed", {"name": "n", "count": "x"})
    assert data(run(host, "go", "typed", name="n", count=3)) == {"name": "n", "count": 3}


@pytest.mark.parametrize("lang", ["py", "go"])
def test_a_start_hook_refusing_its_config_is_fatal_and_never_restarted(
    host: HostProcess, folders: dict[str, Path], lang: str
) -> None:
    """FatalError raised in @agent.on_start (Python) or an error from WithSetup (Go), given a
    config it refuses: the agent is FATAL at once, with the hook's message, and no BACKOFF."""
    name = f"sdk-{lang}-refused"
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name, path=str(folders[lang]), config=struct({"refuse": "no key"})
            )
        ),
        timeout=30,
    )
    event = watch_until(host, name, {"FATAL", "BACKOFF"}, after=response.agent.event_sequence)
    assert state_name(event.state) == "FATAL", event.reason
    assert "refused: no key" in event.reason
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)

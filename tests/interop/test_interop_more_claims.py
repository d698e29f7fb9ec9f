"""More claims of docs/interop.md that no other test asserts, as a user sees them on one real host
(HTTP listener on, no auth) with the test agents flow, seed, calculator and a hand-written MCP
stdio server (``web``) deployed:

- "A2A" / "Cards <- AgentInfo": the description and version fallbacks, each interface's
  protocol_version, the skills' input and output modes and tags, push_notifications false, the
  schemas extension's idempotent, the agent-status extension on the extended card only (every
  key), no security schemes without auth, the default modes; the host's card: each skill's
  examples, each directory entry's tenant and state.
- "A2A" / "Bad input": no skill for an agent of several actions, a part with no content, a url
  part, a message naming an unknown task_id (both bindings); params off the schema with their
  field violations (gRPC google.rpc.BadRequest, JSON-RPC error data); a JSON-RPC call without
  A2A-Version taken as 1.0.
- "A2A" / "Tasks": ListTasks' default page size 50, page_size 1-100, artifacts only with
  include_artifacts; every push notification method PushNotificationNotSupportedError.
- "A2A" / "A message in" and "A task out": SendMessageRequest.metadata.skill, text parts joined
  by newlines, context_id kept or a new UUID, the task id's form; WORKING with
  metadata.ether {pid, attempt}, the output artifact of a string (id, name, text part,
  last_chunk), Task.metadata.ether's fields.
- "MCP servers as agents": tools/call carries {name, arguments} and a progressToken, none of
  Ether's own task fields (ExecuteStream, a stage task; Execute and Pipe: no token); a
  result that is not a CallToolResult is mcp_invalid_result naming the tool; a caller gone
  sends notifications/cancelled; a protocol version mismatch is FATAL with no retry even with
  start_retries.
- "Ether agents as MCP tools" / "Names": a renamed tool is listed and called under its hashed
  name (web__get_page_020f9c84), an unknown tool is JSON-RPC error -32602, and the server
  advertises tools.listChanged (both fronts).
"""

from __future__ import annotations

import asyncio
import re
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
)
from google.protobuf import json_format
from mcp.shared.exceptions import MCPError

from ether.v1 import agent_io_pb2, common_pb2, supervisor_pb2
from tests.interop.a2a_support import (
    call_context,
    data_message,
    events,
    grpc_client,
    send_request,
    state,
    text_message,
)
from tests.interop.test_a2a_doc_claims import BINDINGS, client_of
from tests.interop.test_mcp_doc_claims import deploy_server, log_lines
from tests.support.agents import AGENTS, deploy, state_name
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess
from tests.workflows.runs import run_to_end, value

from .mcp_clients import SURFACES, mcp_session
from .test_mcp_tools import CALCULATOR, run

JSON, TEXT = "application/json", "text/plain"
STATUS_URI = "urn:ether:a2a:agent-status:v1"
PY_SERVERS = Path(__file__).resolve().parent / "mcp_servers_py"

# An MCP stdio server written by hand to the protocol: "get.page" has a name MCP clients of
# Ether cannot take as it is; "record" answers the params of its own tools/call; "malformed"
# answers content that is not a list; "block" never answers, says so on stderr (with its request
# id), reports progress when given a token, and says on stderr when it is cancelled.
RAW_SERVER = """
import json, sys
TOOLS = [{"name": name, "description": name, "inputSchema": {"type": "object"}}
         for name in ("get.page", "record", "malformed", "block")]
def send(message):
    print(json.dumps(message), flush=True)
def say(text):
    print(text, file=sys.stderr, flush=True)
for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "notifications/cancelled":
        say(f"cancelled request {params.get('requestId')}")
    if rid is None or method is None:
        continue
    result = {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name = params.get("name")
        if name == "record":
            result = {"content": [], "structuredContent": {"params": params}}
        elif name == "malformed":
            result = {"content": "not a list"}
        elif name == "get.page":
            result = {"content": [{"type": "text", "text": "the page"}]}
        elif name == "block":
            say(f"blocking request {rid}")
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": 0, "message": "blocking"}})
            continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = tmp_path_factory.mktemp("interop-more")
    (made / "raw.py").write_text(textwrap.dedent(RAW_SERVER))
    return made


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("interop-more-host"), shared=(folder,), http=True)
    try:
        process.wait_serving()
        for agent in (AGENTS / "flow", AGENTS / "seed", CALCULATOR):
            deploy(process, agent)
        event = deploy_server(process, folder, "web", "raw.py")
        assert state_name(event.state) == "RUNNING", event.reason
        yield process
    finally:
        process.stop()


def get_json(url: str) -> Any:
    answer = httpx.get(url, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def jsonrpc(host: HostProcess, agent: str, method: str, params: Any, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(f"{host.http_address}/a2a/{agent}", json=body, headers=headers, timeout=60)
    return answer.json()


def agent_info(host: HostProcess, name: str) -> agent_io_pb2.AgentInfo:
    return host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10).agent


# -- A2A: cards --------------------------------------------------------------------------------


def test_agent_cards_fill_what_agent_info_leaves_out(host: HostProcess) -> None:
    """Cards <- AgentInfo: description else "Ether agent NAME", version else "0"; each interface
    with protocol_version 1.0; skills' input_modes application/json plus text/plain only when
    the action takes text, output_modes both, tags the capabilities and language; capabilities
    push_notifications false and the schemas extension's idempotent as the directory's; the
    agent-status extension (every key) on the extended card only; no security schemes without
    auth; default modes both. Read at the card URLs (HTTP) and with GetExtendedAgentCard."""
    seed = get_json(f"{host.http_address}/a2a/seed/.well-known/agent-card.json")
    flow = get_json(f"{host.http_address}/a2a/flow/.well-known/agent-card.json")
    assert (seed["description"], seed["version"]) == ("Ether agent seed", "0")
    assert (flow["description"], flow["version"]) == ("Test agent for workflow runs.", "1.0.0")
    for card in (seed, flow):
        assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}
        assert (card["defaultInputModes"], card["defaultOutputModes"]) == ([JSON, TEXT],) * 2
        assert card["capabilities"]["pushNotifications"] is False
        assert "securitySchemes" not in card and "securityRequirements" not in card
        assert STATUS_URI not in {e["uri"] for e in card["capabilities"]["extensions"]}
        assert {tuple(skill["outputModes"]) for skill in card["skills"]} == {(JSON, TEXT)}
    [run_skill] = seed["skills"]  # seed's one action takes any params: text suits it
    assert (run_skill["id"], run_skill["inputModes"]) == ("run", [JSON, TEXT])
    skills = {skill["id"]: skill for skill in flow["skills"]}
    assert skills["double"]["inputModes"] == [JSON]  # params {input: number}: no text
    assert skills["double"]["tags"] == ["testing", "python"]
    schemas = flow["capabilities"]["extensions"][0]["params"]["skills"]
    actions = {a.name: a for a in agent_info(host, "flow").actions}
    assert {name: s["idempotent"] for name, s in schemas.items()} == {
        name: a.idempotent for name, a in actions.items()
    }
    assert schemas["gate_once"]["idempotent"] is False and schemas["echo"]["idempotent"] is True

    async def extended() -> a2a_pb2.AgentCard:
        async with grpc_client(host, "flow") as (_, card):
            return card

    card = asyncio.run(extended())
    [status] = [e for e in card.capabilities.extensions if e.uri == STATUS_URI]
    info = agent_info(host, "flow")
    assert json_format.MessageToDict(status.params) == {
        "state": "RUNNING",
        "kind": "general",
        "language": "python",
        "replicas": 1,
        "ready_replicas": info.ready_replicas,
        "in_flight": 0,
        "queued": 0,
        "max_concurrency": info.max_concurrency,
    }


def test_the_host_card_points_at_each_agents_card(host: HostProcess) -> None:
    """The host's card: a skill per agent whose examples are its card's URL; the directory
    extension's entries name each agent's tenant, state and card."""
    card = get_json(f"{host.http_address}/.well-known/agent-card.json")
    url = f"{host.http_address}/a2a/{{}}/.well-known/agent-card.json"
    skills = {skill["id"]: skill for skill in card["skills"]}
    [directory] = card["capabilities"]["extensions"]
    entries = {entry["name"]: entry for entry in directory["params"]["agents"]}
    for name in ("flow", "seed", "calculator", "web"):
        assert skills[name]["examples"] == [url.format(name)]
        assert entries[name] == {
            "name": name,
            "tenant": name,
            "state": "RUNNING",
            "card": url.format(name),
        }


# -- A2A: bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_more_bad_messages_get_their_a2a_errors(host: HostProcess, binding: str) -> None:
    """Bad input: no skill for an agent of several actions and a part with no content are
    InvalidParamsError (the first naming the agent's actions); a url (file) part is
    ContentTypeNotSupportedError; a message naming a task_id no one sent is TaskNotFoundError."""
    no_skill = data_message({"a": 1})
    empty = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="e", parts=[a2a_pb2.Part()])
    empty.metadata.update({"skill": "echo"})
    url = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="u")
    url.parts.add(url="https://example.com/a.pdf", media_type="application/pdf")
    url.metadata.update({"skill": "echo"})
    unknown = data_message({"a": 1}, "echo", task_id="a2a-" + "0" * 32)

    async def main() -> dict[str, Exception]:
        caught: dict[str, Exception] = {}
        async with client_of(host, binding, "flow") as (client, _):
            for name, message in (
                ("no skill", no_skill),
                ("empty part", empty),
                ("url part", url),
                ("unknown task", unknown),
            ):
                try:
                    await events(client, send_request(message))
                except Exception as error:
                    caught[name] = error
        return caught

    caught = asyncio.run(main())
    assert isinstance(caught["no skill"], InvalidParamsError), caught["no skill"]
    assert "echo" in str(caught["no skill"]) and "double" in str(caught["no skill"])
    assert isinstance(caught["empty part"], InvalidParamsError), caught["empty part"]
    assert isinstance(caught["url part"], ContentTypeNotSupportedError), caught["url part"]
    assert isinstance(caught["unknown task"], TaskNotFoundError), caught["unknown task"]


def test_params_off_the_schema_name_the_field_on_both_bindings(host: HostProcess) -> None:
    """Bad input: params that break the skill's schema are InvalidParamsError "with the field
    violations (gRPC: google.rpc.BadRequest)"; over JSON-RPC -32602 with the same BadRequest in
    the error's data."""
    request = send_request(data_message({"input": "x"}, "double"))
    request.tenant = "flow"
    with pytest.raises(grpc.RpcError) as refused:
        stub = a2a_pb2_grpc.A2AServiceStub(host.channel)  # type: ignore[no-untyped-call]
        stub.SendMessage(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = details(refused.value)["BadRequest"].field_violations
    assert [v.field for v in violations] == ["input.params.input"], violations
    assert "is not of type 'number'" in violations[0].description
    params = json_format.MessageToDict(request)
    answer = jsonrpc(host, "flow", "SendMessage", params)
    assert answer["error"]["code"] == -32602, answer
    [bad_request] = [d for d in answer["error"]["data"] if d["@type"].endswith("BadRequest")]
    assert bad_request["fieldViolations"] == [
        {"field": "input.params.input", "description": "'x' is not of type 'number'"}
    ]


def test_a_jsonrpc_call_without_a_version_header_is_taken_as_1_0(host: HostProcess) -> None:
    """Bad input: "a call without [A2A-Version] is taken as 1.0 on both bindings": a plain
    JSON-RPC SendMessage with no header runs its task."""
    message = {
        "messageId": "no-header",
        "role": "ROLE_USER",
        "parts": [{"data": {"plain": True}}],
        "metadata": {"skill": "echo"},
    }
    answer = jsonrpc(host, "flow", "SendMessage", {"message": message})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer
    assert task["artifacts"][0]["parts"][0]["data"] == {"plain": True}


# -- A2A: tasks --------------------------------------------------------------------------------


def test_list_tasks_pages_by_50_bounds_page_size_and_keeps_artifacts_back(
    host: HostProcess,
) -> None:
    """ListTasks: page_size 1-100 (default 50), next_page_token, total_size; artifacts only
    with include_artifacts. 51 finished tasks of one context: the first page without a
    page_size holds 50 of them and a token; page_size 0 and 101 are InvalidParamsError."""
    context_id = f"paging-{uuid.uuid4().hex[:8]}"

    async def main() -> tuple[Any, Any, Any, dict[int, Exception]]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            context = call_context()
            for n in range(51):
                request = send_request(data_message({"n": n}, "echo", context_id=context_id))
                await events(client, request)
            listed = a2a_pb2.ListTasksRequest(context_id=context_id)
            first = await client.list_tasks(listed, context=context)
            listed.include_artifacts = True
            with_artifacts = await client.list_tasks(listed, context=context)
            got = await client.get_task(
                a2a_pb2.GetTaskRequest(id=first.tasks[0].id), context=context
            )
            bad: dict[int, Exception] = {}
            for size in (0, 101):
                try:
                    await client.list_tasks(
                        a2a_pb2.ListTasksRequest(context_id=context_id, page_size=size),
                        context=context,
                    )
                except Exception as error:
                    bad[size] = error
            return first, with_artifacts, got, bad

    first, with_artifacts, got, bad = asyncio.run(main())
    assert (len(first.tasks), first.page_size, first.total_size) == (50, 50, 51)
    assert first.next_page_token
    assert not [task.id for task in first.tasks if task.artifacts]
    assert all(len(task.artifacts) == 1 for task in with_artifacts.tasks)
    assert len(got.artifacts) == 1  # the task has its output: ListTasks held it back
    assert set(bad) == {0, 101}
    assert all(isinstance(error, InvalidParamsError) for error in bad.values()), bad


def test_every_push_notification_method_is_not_supported(host: HostProcess) -> None:
    """Push notification methods (get, list and delete as well as create):
    PushNotificationNotSupportedError."""

    async def main() -> list[Exception]:
        caught: list[Exception] = []
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            [done] = await events(client, send_request(data_message({"p": 1}, "echo")))
            task_id, context = done.task.id, call_context()
            calls = (
                lambda: client.get_task_push_notification_config(
                    a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="c"),
                    context=context,
                ),
                lambda: client.list_task_push_notification_configs(
                    a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
                    context=context,
                ),
                lambda: client.delete_task_push_notification_config(
                    a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c"),
                    context=context,
                ),
            )
            for call in calls:
                try:
                    await call()
                except Exception as error:
                    caught.append(error)
        return caught

    caught = asyncio.run(main())
    assert len(caught) == 3
    assert all(isinstance(error, PushNotificationNotSupportedError) for error in caught), caught


# -- A2A: a message in, a task out --------------------------------------------------------------


def test_a_message_in_skill_text_context_and_task_id(host: HostProcess) -> None:
    """A message in: the skill from SendMessageRequest.metadata when the message has none; text
    parts become {"text": the texts joined by newlines}; message.context_id kept on the task, a
    new UUID when absent; Task.id is "a2a-" and 32 hex digits."""
    by_request = send_request(data_message({"input": 4}))
    by_request.metadata.update({"skill": "double"})
    texts = text_message("one")
    texts.parts.add(text="two")
    texts.context_id = "my-conversation"

    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            [doubled] = await events(client, by_request)
        async with grpc_client(host, "seed", streaming=False) as (client, _):
            [joined] = await events(client, send_request(texts))
        return doubled.task, joined.task

    doubled, joined = asyncio.run(main())
    assert state(doubled) == "COMPLETED", doubled.status
    assert json_format.MessageToDict(doubled.artifacts[0].parts[0].data) == {"value": 8}
    assert json_format.MessageToDict(joined.artifacts[0].parts[0].data) == {"upper": "ONE\nTWO"}
    assert joined.context_id == "my-conversation"
    assert uuid.UUID(doubled.context_id).version == 4
    for task in (doubled, joined):
        assert re.fullmatch(r"a2a-[0-9a-f]{32}", task.id), task.id


def test_a_string_output_is_one_text_artifact(host: HostProcess) -> None:
    """A task out: a string output is a TaskArtifactUpdateEvent (last_chunk true), then
    Task.artifacts[0], with artifact_id <task>-output, name "output" and one text part;
    Task.metadata.ether carries task_id, agent, action, status, duration_ms, cost, pid and
    attempt."""

    async def main() -> tuple[list[a2a_pb2.StreamResponse], a2a_pb2.Task]:
        async with grpc_client(host, "calculator") as (client, _):
            request = send_request(data_message({"name": "Ada"}, "greet"))
            streamed = await events(client, request)
            get = a2a_pb2.GetTaskRequest(id=streamed[0].task.id)
            return streamed, await client.get_task(get, context=call_context())

    streamed, task = asyncio.run(main())
    [artifact] = [e.artifact_update for e in streamed if e.HasField("artifact_update")]
    assert artifact.last_chunk
    assert (artifact.artifact.artifact_id, artifact.artifact.name) == (
        f"{task.id}-output",
        "output",
    )
    [part] = artifact.artifact.parts
    assert (part.WhichOneof("content"), part.text) == ("text", "Hello, Ada!")
    assert list(task.artifacts) == [artifact.artifact]
    ether = json_format.MessageToDict(task.metadata)["ether"]
    assert (ether["task_id"], ether["agent"], ether["action"], ether["status"]) == (
        task.id,
        "calculator",
        "greet",
        "SUCCESS",
    )
    assert ether["pid"] > 0 and ether["attempt"] == 1
    assert {"duration_ms", "cost"} <= set(ether)


def test_a_task_that_starts_later_says_which_process_took_it(
    host: HostProcess, folder: Path
) -> None:
    """A task out: `started` (a replica took it) -> TaskStatusUpdateEvent TASK_STATE_WORKING,
    metadata.ether = {pid, attempt}. An MCP agent of one slot is held by a blocking call, so
    the A2A task waits SUBMITTED; once the blocking call's caller goes away, the stream shows
    WORKING with the pid of the agent's process and attempt 1, then COMPLETED."""
    event = deploy_server(host, folder, "narrowweb", "raw.py", max_concurrency=1)
    assert state_name(event.state) == "RUNNING", event.reason
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input("narrowweb", "block"))
    blocking = host.agents.ExecuteStream(request, timeout=60)

    def until_blocking() -> None:
        for update in blocking:
            if update.WhichOneof("event") == "progress":
                return
        raise AssertionError("the blocking call ended")

    async def main() -> list[a2a_pb2.StreamResponse]:
        await asyncio.to_thread(until_blocking)
        streamed = []
        async with grpc_client(host, "narrowweb") as (client, _):
            request = send_request(data_message({"w": 1}, "record"))
            async for update in client.send_message(request, context=call_context()):
                streamed.append(update)
                if len(streamed) == 1:  # the task as it stands: waiting for the slot
                    blocking.cancel()
        return streamed

    try:
        streamed = asyncio.run(main())
    finally:
        blocking.cancel()
    assert state(streamed[0].task) == "SUBMITTED", streamed[0]
    updates = [e.status_update for e in streamed if e.HasField("status_update")]
    [working] = [u for u in updates if u.status.state == a2a_pb2.TASK_STATE_WORKING]
    [process] = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="narrowweb"), timeout=10
    ).processes
    assert json_format.MessageToDict(working.metadata) == {
        "ether": {"pid": process.pid, "attempt": 1}
    }
    assert updates[-1].status.state == a2a_pb2.TASK_STATE_COMPLETED


# -- MCP servers as agents ---------------------------------------------------------------------


def recorded(output: agent_io_pb2.AgentOutput) -> dict[str, Any]:
    """The params of the tools/call that ``record`` answered (its structuredContent)."""
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    params: dict[str, Any] = data(output)["params"]
    return params


TASK_FIELDS = {
    "task_id": "fields-1",
    "context": agent_io_pb2.TaskContext(
        budget=common_pb2.Budget(max_cost=5, max_iterations=3), session_id="session-1"
    ),
}


def test_a_tool_call_carries_its_arguments_and_a_progress_token_only(host: HostProcess) -> None:
    """`ExecuteStream` / a stage task of action A with params P -> `tools/call` {name: A,
    arguments: P} with a progressToken; Ether's task fields without an MCP counterpart (the
    deadline, task_id, trace, budget, session_id) are not sent. The server answers the params it
    got."""
    streamed = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("web", "record", {"p": [1, "two"]}, **TASK_FIELDS)
    )
    *_, last = host.agents.ExecuteStream(streamed, timeout=30)
    params = recorded(last.output)
    assert set(params) == {"name", "arguments", "_meta"}, params
    assert (params["name"], params["arguments"]) == ("record", {"p": [1, "two"]})
    assert list(params["_meta"]) == ["progressToken"]
    run = run_to_end(
        host,
        """\
name: mcp-fields
stages:
  - {name: one, agent: web, action: record, params: {s: 1}}
""",
    )
    staged = value(run.result)["params"]
    assert set(staged) == {"name", "arguments", "_meta"}, staged
    assert (staged["arguments"], list(staged["_meta"])) == ({"s": 1}, ["progressToken"])


def test_execute_and_pipe_send_no_progress_token(host: HostProcess) -> None:
    """The same row for Execute and Pipe, which show no progress: their tools/call is
    `{name, arguments}` alone (the server is not asked for progress nobody reads)."""
    executed = recorded(execute(host, "web", "record", {"e": 1}))
    pipe = agent_io_pb2.PipeRequest(input=agent_input("web", "record", {"q": 1}, task_id="q-1"))
    [piped] = list(host.agents.Pipe(iter([pipe]), timeout=30))
    for params in (executed, recorded(piped.output)):
        assert set(params) == {"name", "arguments"}, params


def test_a_result_that_is_not_a_call_tool_result_is_mcp_invalid_result(host: HostProcess) -> None:
    """A result that is not a conformant CallToolResult (here: content that is not a list) ->
    status ERROR, code mcp_invalid_result, the reason naming the tool; the server works on."""
    output = execute(host, "web", "malformed")
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "mcp_invalid_result"
    assert "tools/call of malformed" in output.error.message
    assert "content is not a list" in output.error.message
    assert recorded(execute(host, "web", "record"))["name"] == "record"


def test_a_caller_gone_sends_notifications_cancelled(host: HostProcess) -> None:
    """ "a caller gone" -> `notifications/cancelled` for that request: an ExecuteStream whose
    client cancels it once the server has the call (its progress came) makes the host cancel
    that very request id (the server says so on stderr, the agent's log)."""
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input("web", "block"))
    stream = host.agents.ExecuteStream(request, timeout=60)
    try:
        for event in stream:
            if event.WhichOneof("event") == "progress":
                assert event.progress.message == "blocking"
                break
    finally:
        stream.cancel()  # the caller goes away
    lines = log_lines(
        host, "web", lambda seen: any(ln.message.startswith("cancelled ") for ln in seen)
    )
    [blocking] = [ln.message for ln in lines if ln.message.startswith("blocking request")]
    [cancelled] = [ln.message for ln in lines if ln.message.startswith("cancelled ")]
    assert cancelled.removeprefix("cancelled ") == blocking.removeprefix("blocking ")
    assert recorded(execute(host, "web", "record"))["name"] == "record"


def test_a_protocol_mismatch_is_fatal_without_retries(host: HostProcess) -> None:
    """A protocol version not in the handshake list: FATAL at once, no retry, even for an agent
    with start_retries 3: its events go INSTALLING, STARTING, FATAL and its process was never
    restarted."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="mismatch",
                path=str(PY_SERVERS),
                protocol=supervisor_pb2.LINK_PROTOCOL_MCP,
                command=["python", "old_version.py"],
                start_retries=3,
            )
        ),
        timeout=30,
    )
    assert response.agent.info.name == "mismatch"
    seen: list[Any] = []
    watch = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent="mismatch"), timeout=120
    )
    try:
        for event in watch:
            seen.append(event)
            if state_name(event.state) == "FATAL":
                break
    finally:
        watch.cancel()
    assert [state_name(e.state) for e in seen] == ["INSTALLING", "STARTING", "FATAL"], seen
    assert "'1999-01-01'" in seen[-1].reason
    listed = supervisor_pb2.ListProcessesRequest(agent="mismatch")
    assert [p.restarts for p in host.supervisor.ListProcesses(listed, timeout=10).processes] == [0]


# -- Ether agents as MCP tools -----------------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_a_renamed_tool_is_called_by_its_hashed_name(host: HostProcess, surface: str) -> None:
    """Names: `web__get.page` is `web__get_page_020f9c84` (the doc's own example, from an MCP
    server's tool named get.page), listed and called by that name; an unknown tool name is a
    JSON-RPC error -32602 `Unknown tool: NAME`; the server advertises tools.listChanged."""

    async def exchange() -> tuple[Any, set[str], Any, MCPError]:
        async with mcp_session(surface, host) as session:
            capabilities = session.server_capabilities
            names = {tool.name for tool in (await session.list_tools()).tools}
            called = await session.call_tool("web__get_page_020f9c84", {})
            try:
                await session.call_tool("web__get.page", {})
            except MCPError as error:
                return capabilities, names, called, error
            raise AssertionError("a tool was called by a name it is not listed under")

    capabilities, names, called, unknown = run(exchange())
    assert capabilities is not None and capabilities.tools is not None
    assert capabilities.tools.list_changed is True
    assert "web__get_page_020f9c84" in names
    assert not [name for name in names if "." in name]
    assert not called.is_error, called.content
    assert called.structured_content == {
        "content": [{"type": "text", "text": "the page"}],
        "text": "the page",
    }
    assert unknown.error.code == -32602
    assert unknown.error.message == "Unknown tool: web__get.page"

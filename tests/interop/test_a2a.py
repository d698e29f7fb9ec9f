"""A2A over gRPC: every Ether agent is an A2A agent on the host's port (lf.a2a.v1.A2AService),
addressed by its name as tenant, driven here by the a2a-sdk client as any A2A client would."""

from __future__ import annotations

import asyncio
import json
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.interop.a2a_support import (
    call_context,
    data_message,
    events,
    grpc_client,
    logged,
    output,
    send_request,
    state,
    text_message,
)
from tests.support.agents import AGENTS, EXAMPLES, deploy
from tests.support.host import ROOT, HostProcess

A2A = "lf.a2a.v1.A2AService"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    state = tmp_path_factory.mktemp("a2a")
    # Go builds (the wordcount example) reuse the build cache the other suites share, as
    # tests/host/test_readme.py does: only speed depends on it.
    shared = Path(tempfile.gettempdir()) / "ether-gocache"
    shared.mkdir(exist_ok=True)
    (state / "cache").mkdir()
    (state / "cache" / "go-build").symlink_to(shared)
    process = HostProcess(state)
    try:
        process.wait_serving()
        for folder in ("flow", "worker", "seed"):
            deploy(process, AGENTS / folder)
        yield process
    finally:
        process.stop()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_card_over_grpc_names_the_agent_its_skills_and_its_tenant(host: HostProcess) -> None:
    async def main() -> a2a_pb2.AgentCard:
        async with grpc_client(host, "flow") as (_, card):
            return card

    card = run(main())
    assert card.name == "flow"
    [interface] = card.supported_interfaces
    assert (interface.protocol_binding, interface.url, interface.tenant) == (
        "GRPC",
        host.address,
        "flow",
    )
    skills = {skill.id: skill for skill in card.skills}
    assert {"echo", "hold", "double"} <= set(skills)
    assert card.capabilities.streaming and card.capabilities.extended_agent_card
    schemas = json_format.MessageToDict(card.capabilities.extensions[0].params)["skills"]
    assert schemas["double"]["params_schema"]["properties"]["input"]["type"] == "number"
    status = json_format.MessageToDict(card.capabilities.extensions[1].params)
    assert (status["state"], status["ready_replicas"]) == ("RUNNING", 1)


def test_send_runs_the_skill_and_answers_the_finished_task(host: HostProcess) -> None:
    async def main() -> a2a_pb2.Task:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            [event] = await events(client, send_request(data_message({"input": 21}, "double")))
            return event.task

    task = run(main())
    assert state(task) == "COMPLETED"
    assert output(task) == {"value": 42}
    ether = json_format.MessageToDict(task.metadata)["ether"]
    assert (ether["agent"], ether["action"], ether["status"]) == ("flow", "double", "SUCCESS")
    assert task.history[0].parts[0].data.struct_value.fields["input"].number_value == 21


def test_text_goes_to_the_agents_only_action(host: HostProcess) -> None:
    """seed has one action, run, which takes {"text": ...}: a text part is that parameter."""

    async def main() -> a2a_pb2.Task:
        async with grpc_client(host, "seed", streaming=False) as (client, _):
            [event] = await events(client, send_request(text_message("quiet")))
            return event.task

    task = run(main())
    assert state(task) == "COMPLETED", task.status
    assert output(task) == {"upper": "QUIET"}


def test_stream_sends_the_task_then_its_progress_output_and_end(host: HostProcess) -> None:
    async def main() -> list[Any]:
        async with grpc_client(host, "worker") as (client, _):
            return await events(client, send_request(data_message({"ms": 20}, "nap")))

    stream = run(main())
    kinds = [event.WhichOneof("payload") for event in stream]
    assert kinds[0] == "task"
    updates = [e.status_update for e in stream if e.HasField("status_update")]
    working = [u for u in updates if u.status.state == a2a_pb2.TASK_STATE_WORKING]
    # nap reports steps 0..9 of 10; those the agent sent before the stream's first event
    # (the task as it stood) are in that task's status, not repeated
    steps = [
        json_format.MessageToDict(u.status.message.parts[1].data)
        for u in working
        if u.status.HasField("message")
    ]
    assert steps, "no progress streamed"
    assert steps[-1] == {"progress": 9, "total": 10}
    assert [s["progress"] for s in steps] == sorted({s["progress"] for s in steps})
    assert all(
        u.status.message.parts[0].text == "napping" for u in working if u.status.message.parts
    )
    [artifact] = [e.artifact_update for e in stream if e.HasField("artifact_update")]
    assert json_format.MessageToDict(artifact.artifact.parts[0].data) == {"slept": 20}
    assert updates[-1].status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert kinds[-1] == "status_update"
    assert {e.status_update.task_id for e in stream if e.HasField("status_update")} == {
        stream[0].task.id
    }


def test_get_list_and_subscribe_to_a_finished_task(host: HostProcess) -> None:
    """A task sent without streaming can be read back, is listed, and subscribing to it once it
    has ended yields its final state (not an error, not a stream that never ends)."""

    async def main() -> tuple[Any, ...]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            context = call_context()
            [sent] = await events(client, send_request(data_message({"a": 1}, "echo")))
            task_id = sent.task.id
            got = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id), context=context)
            listed = await client.list_tasks(
                a2a_pb2.ListTasksRequest(include_artifacts=True), context=context
            )
        async with grpc_client(host, "flow") as (streaming, _):
            subscribed = [
                e
                async for e in streaming.subscribe(
                    a2a_pb2.SubscribeToTaskRequest(id=task_id), context=context
                )
            ]
        return sent.task, got, listed, subscribed

    sent, got, listed, subscribed = run(main())
    assert got == sent
    assert sent.id in [task.id for task in listed.tasks]
    assert all(task.artifacts for task in listed.tasks if state(task) == "COMPLETED")
    [final] = subscribed
    assert final.task.id == sent.id and state(final.task) == "COMPLETED"
    assert output(final.task) == {"a": 1}


def test_list_pages_through_the_callers_tasks_newest_first(host: HostProcess) -> None:
    async def main() -> tuple[list[str], list[str], int]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            sent = []
            for index in range(3):
                [event] = await events(client, send_request(data_message({"n": index}, "echo")))
                sent.append(event.task.id)
            seen: list[str] = []
            token, total = "", 0
            while True:
                page = await client.list_tasks(
                    a2a_pb2.ListTasksRequest(tenant="flow", page_size=2, page_token=token),
                    context=call_context(),
                )
                seen.extend(task.id for task in page.tasks)
                total = page.total_size
                token = page.next_page_token
                if not token:
                    return sent, seen, total

    sent, seen, total = run(main())
    assert len(seen) == total == len(set(seen))
    assert seen[:3] == sent[::-1]


def test_cancel_reaches_the_agent_and_the_task_ends_canceled(host: HostProcess) -> None:
    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            context = call_context()
            request = send_request(data_message({"tag": "a2a"}, "hold"), return_immediately=True)
            [event] = await events(client, request)
            await asyncio.to_thread(logged, host, "flow", "holding", "a2a")
            cancelled = await client.cancel_task(
                a2a_pb2.CancelTaskRequest(id=event.task.id), context=context
            )
            with pytest.raises(TaskNotCancelableError, match="has ended"):
                await client.cancel_task(
                    a2a_pb2.CancelTaskRequest(id=event.task.id), context=context
                )
            return event.task, cancelled

    submitted, cancelled = run(main())
    assert state(submitted) in ("SUBMITTED", "WORKING")
    assert state(cancelled) == "CANCELED"
    assert logged(host, "flow", "saw cancel", "a2a")["run_task"] == submitted.id


def test_unknown_tenant_unknown_skill_and_bad_parts_get_the_a2a_errors(host: HostProcess) -> None:
    async def main() -> dict[str, Exception]:
        caught: dict[str, Exception] = {}
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            cases = {
                "unknown skill": send_request(data_message({}, "fly")),
                "no parts": send_request(a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="x")),
                "file part": send_request(
                    a2a_pb2.Message(
                        role=a2a_pb2.ROLE_USER,
                        message_id="f",
                        parts=[a2a_pb2.Part(raw=b"%PDF", media_type="application/pdf")],
                        metadata=data_message({}, "echo").metadata,
                    )
                ),
                "text to a skill without text": send_request(text_message("21", "double")),
                "params off the schema": send_request(data_message({"input": "x"}, "double")),
            }
            for name, request in cases.items():
                try:
                    await events(client, request)
                except Exception as error:
                    caught[name] = error
            stub = a2a_pb2_grpc.A2AServiceStub(grpc.aio.insecure_channel(host.address))
            for name, metadata in (
                ("unknown tenant", ()),
                ("version 0.3", (("a2a-version", "0.3"),)),
            ):
                try:
                    request = send_request(data_message({}, "echo"))
                    request.tenant = "nobody" if name == "unknown tenant" else "flow"
                    await stub.SendMessage(request, metadata=metadata, timeout=30)
                except grpc.aio.AioRpcError as error:
                    caught[name] = error
        return caught

    caught = run(main())
    assert isinstance(caught["unknown skill"], InvalidParamsError)
    assert "has no action 'fly'" in str(caught["unknown skill"])
    assert "echo" in str(caught["unknown skill"])  # the message lists the skills
    assert isinstance(caught["no parts"], InvalidParamsError)
    assert "parts is empty" in str(caught["no parts"])
    assert isinstance(caught["file part"], ContentTypeNotSupportedError)
    assert "application/pdf" in str(caught["file part"])
    assert isinstance(caught["text to a skill without text"], ContentTypeNotSupportedError)
    assert isinstance(caught["params off the schema"], InvalidParamsError)
    unknown = caught["unknown tenant"]
    assert isinstance(unknown, grpc.aio.AioRpcError)
    assert unknown.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown tenant 'nobody'" in str(unknown.details())
    version = caught["version 0.3"]
    assert isinstance(version, grpc.aio.AioRpcError)
    assert version.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "A2A version '0.3' is not supported" in str(version.details())


def test_the_sdk_client_reads_an_unsupported_version_as_its_error(host: HostProcess) -> None:
    async def main() -> None:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            context = call_context()
            assert context.service_parameters is not None
            context.service_parameters["a2a-version"] = "2.0"
            await client.get_task(a2a_pb2.GetTaskRequest(id="t"), context=context)

    with pytest.raises((VersionNotSupportedError, A2AClientError)) as caught:
        run(main())
    assert "not supported" in str(caught.value)


def test_reflection_lists_a2a_and_health_covers_it(host: HostProcess) -> None:
    health = health_pb2_grpc.HealthStub(host.channel)
    answer = health.Check(health_pb2.HealthCheckRequest(service=A2A), timeout=10)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(host.channel)
    [answer_] = list(
        stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
    )
    assert A2A in {s.name for s in answer_.list_services_response.service}


def test_more_bad_messages_get_invalid_params_or_unsupported(host: HostProcess) -> None:
    async def main() -> dict[str, Exception]:
        caught: dict[str, Exception] = {}
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            [done] = await events(client, send_request(data_message({"n": 1}, "echo")))
            mixed = data_message({"n": 1}, "echo")
            mixed.parts.add(text="and some text")
            scalar = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="s")
            scalar.parts.add().data.number_value = 3
            scalar.metadata.update({"skill": "echo"})
            cases = {
                "data beside text": send_request(mixed),
                "data not an object": send_request(scalar),
                "follow-up": send_request(data_message({}, "echo", task_id=done.task.id)),
            }
            for name, request in cases.items():
                try:
                    await events(client, request)
                except Exception as error:
                    caught[name] = error
            try:
                await client.create_task_push_notification_config(
                    a2a_pb2.TaskPushNotificationConfig(task_id=done.task.id, url="http://x"),
                    context=call_context(),
                )
            except Exception as error:
                caught["push"] = error
            stub = a2a_pb2_grpc.A2AServiceStub(grpc.aio.insecure_channel(host.address))
            try:
                await stub.SendMessage(send_request(data_message({}, "echo")), timeout=30)
            except grpc.aio.AioRpcError as error:
                caught["no tenant"] = error
        return caught

    caught = run(main())
    assert isinstance(caught["data beside text"], InvalidParamsError)
    assert isinstance(caught["data not an object"], InvalidParamsError)
    assert "JSON object" in str(caught["data not an object"])
    assert isinstance(caught["follow-up"], UnsupportedOperationError)
    assert isinstance(caught["push"], PushNotificationNotSupportedError)
    no_tenant = caught["no tenant"]
    assert isinstance(no_tenant, grpc.aio.AioRpcError)
    assert no_tenant.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tenant is required" in str(no_tenant.details())


def test_a_failed_action_and_a_passed_deadline_are_failed_tasks(host: HostProcess) -> None:
    """An action that fails ends FAILED with the agent's error; a call with a deadline gives its
    task that deadline: the task ends FAILED, saying so, and the call gets it in time."""

    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            request = send_request(data_message({"code": "nope", "message": "no way"}, "fail"))
            [failed] = await events(client, request)
            short = call_context()
            short.timeout = 2
            held = send_request(data_message({"tag": "deadline"}, "hold"))
            [ended] = [e async for e in client.send_message(held, context=short)]
            return failed.task, ended.task

    failed, ended = run(main())
    assert state(failed) == "FAILED"
    error = json_format.MessageToDict(failed.status.message.parts[1].data)["error"]
    assert (error["code"], error["message"]) == ("nope", "no way (input None)")
    assert failed.status.message.parts[0].text == "no way (input None)"
    assert state(ended) == "FAILED"
    assert "did not finish before its deadline" in ended.status.message.parts[0].text


def test_list_filters_by_context_and_state(host: HostProcess) -> None:
    async def main() -> tuple[str, list[str], list[str]]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            message = data_message({"c": 1}, "echo", context_id="ctx-list")
            [sent] = await events(client, send_request(message))
            in_context = await client.list_tasks(
                a2a_pb2.ListTasksRequest(context_id="ctx-list"), context=call_context()
            )
            failed = await client.list_tasks(
                a2a_pb2.ListTasksRequest(status=a2a_pb2.TASK_STATE_FAILED), context=call_context()
            )
            return sent.task.id, [t.id for t in in_context.tasks], [state(t) for t in failed.tasks]

    sent, in_context, failed_states = run(main())
    assert in_context == [sent]
    assert set(failed_states) <= {"FAILED"}


def test_the_host_stops_cleanly_with_a2a_tasks_and_streams_open(tmp_path: Path) -> None:
    """SIGTERM with an A2A task running and a client streaming it: the host drains, stops its
    agents and exits 0 within its grace; the stream ends instead of hanging."""
    process = HostProcess(tmp_path / "state")
    try:
        process.wait_serving()
        deploy(process, AGENTS / "flow")

        async def main() -> BaseException | None:
            async with grpc_client(process, "flow") as (client, _):
                request = send_request(data_message({"tag": "stop"}, "hold"))
                stream = client.send_message(request, context=call_context())
                first = await anext(stream)
                assert first.HasField("task")
                await asyncio.to_thread(logged, process, "flow", "holding", "stop")
                process.process.send_signal(signal.SIGTERM)
                try:
                    async for _ in stream:
                        pass
                except Exception as error:
                    return error
            return None

        ended = run(main())
        assert process.process.wait(60) == 0
        assert ended is None or "UNAVAILABLE" in str(ended) or "CANCELLED" in str(ended), ended
    finally:
        if process.process.poll() is None:
            process.stop()


def test_go_and_typescript_agents_are_a2a_agents_too(host: HostProcess) -> None:
    """The example wordcount (Go) and report (TypeScript) agents answer through A2A like the
    Python ones: the same cards, parts and artifacts whatever the agent's language."""
    for name in ("wordcount", "report"):
        deploy(host, EXAMPLES / name)

    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task, list[str]]:
        async with grpc_client(host, "wordcount", streaming=False) as (client, card):
            languages = [tag for skill in card.skills for tag in skill.tags]
            request = send_request(data_message({"paths": [str(ROOT / "docs")], "top": 3}, "count"))
            [counted] = await events(client, request)
        async with grpc_client(host, "report", streaming=False) as (client, card):
            languages += [tag for skill in card.skills for tag in skill.tags]
            findings = [{"title": "Token in code", "severity": "high", "file": "a.py"}]
            request = send_request(data_message({"title": "Audit", "findings": findings}, "render"))
            [rendered] = await events(client, request)
        return counted.task, rendered.task, languages

    counted, rendered, languages = run(main())
    assert {"go", "typescript"} <= set(languages)
    assert state(counted) == "COMPLETED", counted.status
    assert len(output(counted)["top_terms"]) == 3
    assert state(rendered) == "COMPLETED", rendered.status
    assert "Token in code" in json.dumps(output(rendered))

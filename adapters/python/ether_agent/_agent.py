"""The SDK surface: an Agent, its actions, and what a handler may return."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import os
import typing
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any, Literal, NoReturn, TypeVar

from ._context import Link, Logger, TaskContext
from ._errors import AgentError
from ._schema import Schema, accepts_any_object, type_schema

MAX_FRAME_DEFAULT = 16 * 1024 * 1024
F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class NextAction:
    """A follow-up the agent proposes: run ``action`` of ``agent`` with ``params``."""

    agent: str
    action: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"agent": self.agent, "action": self.action, "params": self.params}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclasses.dataclass
class Output:
    """A result with extras: follow-ups, cost and model (added to what ``ctx.cost`` reported).

    With ``error`` set the task ends with status ``partial``: ``data`` holds what was done.
    """

    data: Any = None
    next_actions: Sequence[NextAction | dict[str, Any]] = ()
    cost: float | None = None
    model: str | None = None
    error: AgentError | None = None


def Partial(
    data: Any,
    error: AgentError | str,
    *,
    next_actions: Sequence[NextAction | dict[str, Any]] = (),
    cost: float | None = None,
    model: str | None = None,
) -> Output:
    """A result with status ``partial``: ``data`` is what was done, ``error`` what stopped it."""
    err = error if isinstance(error, AgentError) else AgentError("partial", str(error))
    return Output(data, next_actions=next_actions, cost=cost, model=model, error=err)


# --- actions ---------------------------------------------------------------------------------

Style = Literal["kwargs", "params", "payload"]


@dataclasses.dataclass
class ActionSpec:
    """One declared action: its handler, its params schema and how params reach the handler."""

    name: str
    description: str
    fn: Callable[..., Any]
    params_schema: Schema
    idempotent: bool
    is_async: bool
    style: Style
    ctx_param: str | None
    param_names: tuple[str, ...]
    integer_params: frozenset[str]
    var_keyword: bool
    # Seconds the host keeps its SUCCESS results for the same params (the result cache); 0: none.
    cache_ttl: float = 0.0
    # Whether any object passes params_schema: then a task's params are checked for being an
    # object only, not walked key by key.
    any_object_params: bool = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.any_object_params = accepts_any_object(self.params_schema)

    def hello(self) -> dict[str, Any]:
        """The action as declared in the hello frame."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "params_schema": self.params_schema,
        }
        if self.idempotent:
            out["idempotent"] = True
        if self.cache_ttl:
            out["cache_ttl"] = self.cache_ttl
        return out

    async def invoke(self, params: Any, ctx: TaskContext, pool: Executor) -> Any:
        """Run the handler: awaited when async, in ``pool`` when sync."""
        args, kwargs = self._bind(params, ctx)
        if self.is_async:
            return await self.fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        call = functools.partial(self.fn, *args, **kwargs)
        result = await loop.run_in_executor(pool, contextvars.copy_context().run, call)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _bind(self, params: Any, ctx: TaskContext) -> tuple[list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        if self.ctx_param:
            kwargs[self.ctx_param] = ctx
        if self.style == "payload":
            return ([params, ctx] if self.ctx_param else [params]), {}
        if self.style == "params":
            kwargs[self.param_names[0]] = params
            return [], kwargs
        for key, value in params.items():
            if key in self.param_names or self.var_keyword:
                if key in self.integer_params and isinstance(value, float):
                    value = int(value)
                kwargs[key] = value
        return [], kwargs


def _is_context(annotation: Any, name: str) -> bool:
    if annotation is TaskContext or TaskContext in typing.get_args(annotation):
        return True
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "TaskContext"
    return annotation is inspect.Parameter.empty and name in ("ctx", "context")


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints: dict[str, Any] = {}
        namespace = getattr(fn, "__globals__", {})
        for name, ann in getattr(fn, "__annotations__", {}).items():
            if isinstance(ann, str):
                with contextlib.suppress(Exception):
                    ann = eval(ann, namespace, {})
            hints[name] = ann
        return hints


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _is_mapping(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    return type_schema(annotation).get("type") == "object"


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )


def make_action(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    schema: Schema | None = None,
    payload: bool = False,
    cache_ttl: float = 0.0,
) -> ActionSpec:
    """Describe ``fn`` as an action; params schema from its type hints unless ``schema`` is given.

    With ``payload=True`` the handler is a plain callback ``fn(payload)`` or
    ``fn(payload, ctx)`` (the seeds' style) with an any-object schema. With ``cache_ttl``
    (seconds) the host answers the same params from its result cache for that long.
    """
    if isinstance(cache_ttl, bool) or not isinstance(cache_ttl, int | float) or cache_ttl < 0:
        raise TypeError(f"cache_ttl must be a number of seconds >= 0, not {cache_ttl!r}")
    sig = inspect.signature(fn)
    hints = _hints(fn)
    action_name: str = name or str(getattr(fn, "__name__", "run"))
    doc = inspect.getdoc(fn) or ""
    desc = description if description is not None else doc.split("\n\n", 1)[0].strip()
    ctx_param: str | None = None
    fields: list[tuple[inspect.Parameter, Any]] = []
    var_keyword = False
    for p in sig.parameters.values():
        ann = hints.get(p.name, p.annotation)
        if p.kind is p.VAR_POSITIONAL:
            raise TypeError(f"action {action_name!r}: *{p.name} is not supported")
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
        elif _is_context(ann, p.name) and ctx_param is None:
            ctx_param = p.name
        else:
            fields.append((p, ann))

    def build(
        params_schema: Schema,
        style: Style,
        names: tuple[str, ...],
        integers: frozenset[str] = frozenset(),
        ctx: str | None = ctx_param,
    ) -> ActionSpec:
        return ActionSpec(
            name=action_name,
            description=desc,
            fn=fn,
            params_schema=schema if schema is not None else params_schema,
            idempotent=idempotent,
            is_async=_is_async(fn),
            style=style,
            ctx_param=ctx,
            param_names=names,
            integer_params=integers,
            var_keyword=var_keyword,
            cache_ttl=float(cache_ttl),
        )

    if payload:
        if len(fields) > 2 or not fields:
            raise TypeError(f"{action_name!r}: a plain callback takes (payload) or (payload, ctx)")
        ctx = fields[1][0].name if len(fields) == 2 else ctx_param
        return build({"type": "object"}, "payload", (fields[0][0].name,), ctx=ctx)
    for p, _ in fields:
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"action {action_name!r}: positional-only {p.name!r} is not supported")
    if (
        len(fields) == 1
        and fields[0][0].name in ("params", "payload")
        and _is_mapping(fields[0][1])
    ):
        return build({"type": "object"}, "params", (fields[0][0].name,))
    props: dict[str, Any] = {}
    required: list[str] = []
    integers: set[str] = set()
    for p, ann in fields:
        prop = type_schema(ann) if ann is not inspect.Parameter.empty else {}
        if prop.get("type") == "integer":
            integers.add(p.name)
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        elif _jsonable(p.default):
            prop = {**prop, "default": p.default}
        props[p.name] = prop
    derived: Schema = {"type": "object", "properties": props}
    if required:
        derived["required"] = required
    if not var_keyword:
        derived["additionalProperties"] = False
    return build(derived, "kwargs", tuple(p.name for p, _ in fields), frozenset(integers))


# --- the agent -------------------------------------------------------------------------------


class Agent:
    """An agent: a name, its actions and what it supports.

    ::

        agent = Agent("greeter", version="1.0", description="Says hello.")

        @agent.action(description="Greet someone.")
        async def greet(name: str, excited: bool = False, ctx: TaskContext | None = None) -> str:
            return f"Hello, {name}{'!' if excited else '.'}"

        if __name__ == "__main__":
            agent.run()
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        version: str = "0.1.0",
        description: str = "",
        kind: Literal["general", "io_gateway"] = "general",
        tags: Iterable[str] = (),
        max_concurrency: int = 8,
        max_frame: int = MAX_FRAME_DEFAULT,
        calls: Iterable[str] = ("agent.call",),
    ) -> None:
        if kind not in ("general", "io_gateway"):
            raise ValueError(f"kind must be 'general' or 'io_gateway', not {kind!r}")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.name = name or os.environ.get("ETHER_AGENT_NAME") or "agent"
        self.version = version
        self.description = description
        self.kind = kind
        self.tags = list(tags)
        self.max_concurrency = max_concurrency
        self.max_frame = max_frame
        self.calls = list(calls)
        self.actions: dict[str, ActionSpec] = {}
        self.config: dict[str, Any] = {}
        """The deployment's config, from the host's welcome (empty until then)."""
        self.link: Link | None = None
        self.log = Logger(lambda: self.link, name=self.name)
        """Agent-level structured logs (not tied to a task)."""
        self.start_hooks: list[Callable[..., Any]] = []
        self.stop_hooks: list[Callable[..., Any]] = []

    def action(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        idempotent: bool = False,
        schema: Schema | None = None,
        cache_ttl: float = 0.0,
    ) -> Any:
        """Declare an action; use as ``@agent.action`` or ``@agent.action(description=...)``."""

        def register(handler: F) -> F:
            self.add_action(
                handler,
                name=name,
                description=description,
                idempotent=idempotent,
                schema=schema,
                cache_ttl=cache_ttl,
            )
            return handler

        return register(fn) if fn is not None else register

    def add_action(self, fn: Callable[..., Any], **options: Any) -> ActionSpec:
        """Declare ``fn`` as an action (the non-decorator form of ``action``)."""
        spec = make_action(fn, **options)
        if spec.name in self.actions:
            raise ValueError(f"action {spec.name!r} is declared twice")
        self.actions[spec.name] = spec
        return spec

    def on_start(self, fn: F) -> F:
        """Run ``fn(config)`` (sync or async) after the welcome, before the first task.
        Raise ``FatalError`` there to refuse a config for good."""
        self.start_hooks.append(fn)
        return fn

    def on_stop(self, fn: F) -> F:
        """Run ``fn()`` (sync or async) once in-flight tasks are done, before the exit."""
        self.stop_hooks.append(fn)
        return fn

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], *, name: str | None = None) -> Agent:
        """A single-action agent around a plain callback ``fn(payload) -> result``."""
        agent = cls(name, description=(inspect.getdoc(fn) or "").split("\n\n", 1)[0])
        spec = make_action(fn, payload=True)
        agent.actions[spec.name] = spec
        return agent

    def hello_actions(self) -> list[dict[str, Any]]:
        return [spec.hello() for spec in self.actions.values()]

    def run(self) -> NoReturn:
        """Serve this agent on the stdio link until shutdown; exits the process."""
        from ._runtime import serve

        serve(self)

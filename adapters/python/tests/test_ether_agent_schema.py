"""Params schemas derived from type hints, and their checks."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from ether_agent import Agent, TaskContext
from ether_agent._schema import validate


class Point(TypedDict):
    x: int
    y: int


def test_schema_from_type_hints_marks_defaults_optional_and_skips_ctx() -> None:
    """Each hinted param becomes a property; params without defaults are required."""
    agent = Agent("t")

    @agent.action
    def act(
        name: str,
        count: int,
        ratio: float,
        flag: bool,
        tags: list[str],
        extra: dict[str, int],
        mode: Literal["a", "b"],
        point: Point,
        note: Annotated[str, "a note"],
        ctx: TaskContext,
        maybe: str | None = None,
        limit: int = 10,
    ) -> None:
        """Do it.

        More text that is not the description."""

    spec = agent.actions["act"]
    schema = spec.params_schema
    assert spec.description == "Do it."
    assert spec.ctx_param == "ctx"
    assert schema["required"] == [
        "name",
        "count",
        "ratio",
        "flag",
        "tags",
        "extra",
        "mode",
        "point",
        "note",
    ]
    props = schema["properties"]
    assert props["name"] == {"type": "string"}
    assert props["count"] == {"type": "integer"}
    assert props["ratio"] == {"type": "number"}
    assert props["flag"] == {"type": "boolean"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["mode"] == {"enum": ["a", "b"]}
    assert props["point"]["properties"] == {"x": {"type": "integer"}, "y": {"type": "integer"}}
    assert props["note"] == {"type": "string", "description": "a note"}
    assert props["maybe"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert schema["additionalProperties"] is False


def test_single_params_dict_gets_the_whole_object_and_explicit_schema_wins() -> None:
    """``params: dict`` receives every param; ``schema=`` replaces the derived schema."""
    agent = Agent("t")

    @agent.action(schema={"type": "object", "required": ["q"]})
    async def search(params: dict[str, Any]) -> Any:
        return params

    spec = agent.actions["search"]
    assert spec.style == "params"
    assert spec.params_schema == {"type": "object", "required": ["q"]}


def test_validate_reports_each_field() -> None:
    """Missing and mistyped params are reported with their field; an unexpected one is the
    host's to refuse (additionalProperties: false is not a shape)."""
    schema = {
        "type": "object",
        "properties": {
            "ms": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["ms"],
        "additionalProperties": False,
    }
    assert validate(schema, {"ms": 5}) == []
    assert validate(schema, {"ms": 5.0}) == []
    assert validate(schema, {"ms": True}) == [
        {"field": "ms", "description": "expected integer, got boolean"}
    ]
    assert validate(schema, {"tags": ["a", 1], "x": 1, "extra": {"n": "1"}}) == [
        {"field": "ms", "description": "required"},
        {"field": "tags[1]", "description": "expected string, got number"},
        {"field": "extra.n", "description": "expected integer, got string"},
    ]
    assert validate(schema, [1]) == [
        {"field": "params", "description": "expected object, got array"}
    ]


def test_validate_leaves_every_other_keyword_to_the_host() -> None:
    """enum, const, bounds, lengths, patterns and combinators are checked by the host before
    dispatch (docs/protocol.md, params rule): the adapter lets them through."""
    schema = {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red"]},
            "fixed": {"const": 1},
            "n": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.5},
            "s": {"type": "string", "maxLength": 1, "pattern": "^a$"},
            "either": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "any": {"anyOf": [{"type": "string"}]},
        },
    }
    params = {"colour": "blue", "fixed": True, "n": 7, "s": "bbb", "either": 3, "any": 1}
    assert validate(schema, params) == []


def test_only_schemas_that_accept_any_object_skip_the_params_walk() -> None:
    """The runtime checks only the kind of params for these (the host decides the same way)."""
    from ether_agent._schema import accepts_any_object

    assert accepts_any_object({"type": "object"})
    assert accepts_any_object({"type": "object", "description": "d", "additionalProperties": {}})
    assert not accepts_any_object({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert not accepts_any_object({"type": "object", "required": ["n"]})
    assert not accepts_any_object({"type": "object", "additionalProperties": False})
    assert not accepts_any_object({"type": "array"})

"""The ``when:`` language (workflows/expr.py) and data paths (workflows/paths.py), table-driven.

Pure functions with no process boundary, so the tables call them directly: every operator,
precedence, missing paths, values of different kinds, and the parse errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from ether_host.workflows.expr import ExprError, Ref, data_env, parse_condition
from ether_host.workflows.limits import MAX_WHEN_BYTES, MAX_WHEN_DEPTH
from ether_host.workflows.paths import Missing, PathError, parse_path, resolve

STATUS = {"scan": "SUCCEEDED", "review": "PARTIAL", "triage": "FAILED", "later": "SKIPPED"}
DATA: dict[str, Any] = {
    "scan": {
        "matches": [{"path": "a.py", "line": 3}, {"path": "b.py", "line": 9}],
        "count": 2,
        "ratio": 0.5,
        "name": "scanner",
        "flag": True,
        "off": False,
        "nothing": None,
        "empty": [],
        "tags": ["x", "y"],
        "big": 2**53 + 1,
    },
    "review": {"score": 4, "notes": {"style": "ok"}},
    "triage": None,
    "later": {},
}


def evaluate(text: str) -> bool:
    env = data_env(lambda stage: STATUS[stage], lambda stage: DATA[stage])
    return parse_condition(text).evaluate(env)


TRUTHS: list[tuple[str, bool]] = [
    # statuses and bare status names
    ('scan.status == "SUCCEEDED"', True),
    ("scan.status == SUCCEEDED", True),
    ("review.status == PARTIAL", True),
    ("later.status == SKIPPED", True),
    ("triage.status != FAILED", False),
    ("triage.status in [PARTIAL, FAILED]", True),
    ("scan.status in ['PARTIAL', 'FAILED']", False),
    # == and != over every kind
    ("scan.data.count == 2", True),
    ("scan.data.count == 2.0", True),
    ("scan.data.count != 3", True),
    ("scan.data.name == 'scanner'", True),
    ('scan.data.name == "scan"', False),
    ("scan.data.flag == true", True),
    ("scan.data.off == false", True),
    ("scan.data.nothing == null", True),
    ("scan.data.tags == ['x', 'y']", True),
    ("scan.data.tags == ['y', 'x']", False),
    ("review.data.notes == review.data.notes", True),
    ("scan.data.empty == []", True),
    # values of different kinds are never equal (and never an error)
    ("scan.data.flag == 1", False),
    ("scan.data.off == 0", False),
    ("scan.data.flag != 1", True),
    ("scan.data.nothing == false", False),
    ("scan.data.count == '2'", False),
    ("[true] == [1]", False),
    ("1 in [true]", False),
    ("0 in [false, null]", False),
    ("null == 0", False),
    # ordering: numbers with numbers, strings with strings, anything else false
    ("scan.data.count < 3", True),
    ("scan.data.count <= 2", True),
    ("scan.data.count > 2", False),
    ("scan.data.count >= 2", True),
    ("scan.data.ratio < 1", True),
    ("-1 < scan.data.ratio", True),
    ("1e3 > 999", True),
    ("scan.data.big > 9007199254740992", True),
    ("'abc' < 'abd'", True),
    ("'b' > 'a'", True),
    ("scan.data.name < 3", False),
    ("scan.data.name > 3", False),
    ("scan.data.flag > 0", False),
    ("scan.data.flag >= true", False),
    ("scan.data.nothing < 1", False),
    ("scan.data.tags > []", False),
    # in / not in: lists, substrings, object keys
    ("'x' in scan.data.tags", True),
    ("'z' in scan.data.tags", False),
    ("'z' not in scan.data.tags", True),
    ("'can' in scan.data.name", True),
    ("3 in scan.data.name", False),
    ("'style' in review.data.notes", True),
    ("'ok' in review.data.notes", False),
    ("1 in scan.data.count", False),
    ("[1] in [[1], [2]]", True),
    ("'a' in []", False),
    # len
    ("len(scan.data.matches) == 2", True),
    ("len(scan.data.name) == 7", True),
    ("len(review.data.notes) == 1", True),
    ("len(scan.data.empty) == 0", True),
    ("len(scan.data.count) == 0", True),
    ("len(scan.data.missing) == 0", True),
    ("len(scan.data) > 5", True),
    # precedence, loosest first: or, and, not, comparisons
    ("true and false or true", True),
    ("true or false and false", True),
    ("(true or false) and false", False),
    ("not false and false", False),
    ("not (false and false)", True),
    ("not scan.data.count == 3", True),
    ("not not scan.data.flag", True),
    ("false or false or scan.data.flag", True),
    ("true and true and scan.data.off", False),
    ("not review.data.score < 3 or triage.status in ['PARTIAL', 'FAILED']", True),
    # truthiness of a bare value
    ("scan.data.flag", True),
    ("scan.data.off", False),
    ("scan.data.count", True),
    ("scan.data.empty", False),
    ("scan.data.nothing", False),
    ("scan.data.name", True),
    ("''", False),
    ("0", False),
    ("review.data.notes", True),
    ("later.data", False),
    # missing paths are null: equal to null, false everywhere else, never an error
    ("scan.data.missing == null", True),
    ("scan.data.missing != null", False),
    ("scan.data.missing", False),
    ("scan.data.missing < 1", False),
    ("scan.data.missing in ['a']", False),
    ("scan.data.matches.9.path == null", True),
    ("scan.data.count.deeper == null", True),
    ("triage.data.anything == null", True),
    ("scan.data.matches.x == null", True),
    # paths: indexes, negative indexes, the wildcard
    ("scan.data.matches.0.path == 'a.py'", True),
    ("scan.data.matches.-1.line == 9", True),
    ("scan.data.matches.*.path == ['a.py', 'b.py']", True),
    ("'b.py' in scan.data.matches.*.path", True),
    ("scan.data.matches.*.nope == null", True),
    ("scan.data.name.* == null", True),
    # literals
    ("'it\\'s' == \"it's\"", True),
    ('"a\\"b" == \'a"b\'', True),
    ("'\\u00e9' == 'é'", True),
    ("'a\\\\' == \"a\\\\\"", True),
    ("'a\\\"b' == 'a\"b'", True),
    ("'tab\\there' == \"tab\\there\"", True),
    ("[1, 'a', null, [true]] == [1, 'a', null, [true]]", True),
    ("[] == []", True),
    ("2.50 == 2.5", True),
    ("-0 == 0", True),
]


@pytest.mark.parametrize(("text", "expected"), TRUTHS, ids=[t for t, _ in TRUTHS])
def test_when_evaluates(text: str, expected: bool) -> None:
    assert evaluate(text) is expected


ERRORS: list[tuple[str, str]] = [
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("scan", "unknown name 'scan'"),
    ("scan.result", "names nothing"),
    ("scan.status.x == 1", "names nothing"),
    ("succeeded", "unknown name"),
    ("scan.status ==", "expected a value but found 'the end'"),
    ("== 1", "expected a value"),
    ("1 < 2 < 3", "after a complete expression"),
    ("(true", "expected ')' but found 'the end'"),
    ("true)", "unexpected ')'"),
    ("len scan.data", "expected '('"),
    ("len(scan.data", "expected ')'"),
    ("[1, 2", "expected ',' or ']'"),
    ("[1 2]", "expected ',' or ']'"),
    ("scan.status = SUCCEEDED", "unexpected '= SUCCEEDED'"),
    ("scan.status == SUCCEEDED && true", "unexpected '&&"),
    ("'unterminated", "unexpected"),
    ("not", "expected a value"),
    ("true and", "expected a value"),
    ("in [1]", "expected a value"),
    ("1 not 2", "after a complete expression"),
    ("'\\x41' == 'A'", "bad string literal"),
    ("(" * (MAX_WHEN_DEPTH + 1) + "true" + ")" * (MAX_WHEN_DEPTH + 1), "MAX_WHEN_DEPTH"),
    ("not " * (MAX_WHEN_DEPTH + 1) + "true", "MAX_WHEN_DEPTH"),
    ("len(" * (MAX_WHEN_DEPTH + 1) + "1" + ")" * (MAX_WHEN_DEPTH + 1), "MAX_WHEN_DEPTH"),
    ("[" * (MAX_WHEN_DEPTH + 1) + "]" * (MAX_WHEN_DEPTH + 1), "MAX_WHEN_DEPTH"),
    ("1 == " + "1" * MAX_WHEN_BYTES, "MAX_WHEN_BYTES"),
    ("'" + "é" * (MAX_WHEN_BYTES // 2) + "'", "MAX_WHEN_BYTES"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[t[:40] for t, _ in ERRORS])
def test_when_refuses(text: str, message: str) -> None:
    """A malformed condition fails to parse with a message that says what is wrong."""
    with pytest.raises(ExprError) as caught:
        parse_condition(text)
    assert message in str(caught.value)


def test_depth_limit_is_inclusive() -> None:
    """MAX_WHEN_DEPTH levels parse; one more does not (the row above)."""
    depth = MAX_WHEN_DEPTH
    assert evaluate("(" * depth + "true" + ")" * depth) is True
    assert evaluate("not " * depth + "false") is (depth % 2 == 1)


def test_long_and_chains_are_flat() -> None:
    """``and``/``or`` chains do not nest, so a chain near the byte limit parses and runs."""
    text = " and ".join(["true"] * (MAX_WHEN_BYTES // 10))
    assert evaluate(text) is True
    assert evaluate(text + " and false") is False


def test_refs_name_what_the_condition_reads() -> None:
    """A condition lists the stage values it reads, so a spec can check the stages exist."""
    condition = parse_condition("scan.status == SUCCEEDED and len(review.data.notes.style) > 0")
    assert condition.refs == (Ref("scan", "status"), Ref("review", "data", ("notes", "style")))


def test_short_circuit_reads_only_what_it_needs() -> None:
    """``or`` stops at the first true operand and ``and`` at the first false one."""
    read: list[str] = []

    def env(ref: Ref) -> Any:
        read.append(ref.stage)
        return {"a": True, "b": False}.get(ref.stage)

    assert parse_condition("a.data or c.data").evaluate(env) is True
    assert parse_condition("b.data and c.data").evaluate(env) is False
    assert read == ["a", "b"]


PATHS: list[tuple[str, str, tuple[str, ...]]] = [
    ("scan.data", "scan", ()),
    ("scan.data.a.0.b", "scan", ("a", "0", "b")),
    (" scan.data.*.path ", "scan", ("*", "path")),
]


@pytest.mark.parametrize(("text", "stage", "keys"), PATHS)
def test_parse_path(text: str, stage: str, keys: tuple[str, ...]) -> None:
    path = parse_path(text)
    assert (path.stage, path.keys) == (stage, keys)
    assert str(path) == text.strip()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scan", "names nothing"),
        ("scan.status", "names nothing"),
        (".data", "names nothing"),
        ("scan.data..a", "empty key"),
        ("scan.data.a.", "empty key"),
    ],
)
def test_parse_path_refuses(text: str, message: str) -> None:
    with pytest.raises(PathError, match=message):
        parse_path(text)


RESOLVED: list[tuple[Any, tuple[str, ...], Any]] = [
    ({"a": {"b": 1}}, ("a", "b"), 1),
    ({"a": [10, 20, 30]}, ("a", "1"), 20),
    ({"a": [10, 20, 30]}, ("a", "-3"), 10),
    ([{"p": 1}, {"p": 2}], ("*", "p"), [1, 2]),
    ([[1, 2], [3]], ("*", "0"), [1, 3]),
    ([], ("*", "p"), []),
    ({"a": None}, ("a",), None),
    ({"a": [{"b": [{"c": 1}, {"c": 2}]}]}, ("a", "*", "b", "*", "c"), [[1, 2]]),
]


@pytest.mark.parametrize(("value", "keys", "expected"), RESOLVED)
def test_resolve(value: Any, keys: tuple[str, ...], expected: Any) -> None:
    assert resolve(value, keys) == expected


MISSES: list[tuple[Any, tuple[str, ...], str]] = [
    ({"a": 1}, ("b",), "data has no key 'b' (keys: a)"),
    ({}, ("b",), "data has no key 'b' (keys: none)"),
    ({"a": [1, 2]}, ("a", "2"), "data.a has 2 elements; index 2 is out of range"),
    ({"a": [1, 2]}, ("a", "-3"), "index -3 is out of range"),
    ({"a": [1]}, ("a", "x"), "data.a is a list; 'x' is not an index"),
    ({"a": None}, ("a", "b"), "data.a is null, which has no key 'b'"),
    ({"a": "text"}, ("a", "b"), "data.a is str, which has no key 'b'"),
    ({"a": 1}, ("a", "*"), "data.a is not a list, so data.a.* names nothing"),
    ([{"p": 1}, {"q": 2}], ("*", "p"), "data.1 has no key 'p'"),
]


@pytest.mark.parametrize(("value", "keys", "where"), MISSES)
def test_resolve_says_where_it_stopped(value: Any, keys: tuple[str, ...], where: str) -> None:
    found = resolve(value, keys)
    assert isinstance(found, Missing)
    assert where in found.where

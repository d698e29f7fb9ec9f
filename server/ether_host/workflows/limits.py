"""The bounds of a workflow spec, each checked before anything of the spec is built.

A spec is refused with INVALID_ARGUMENT naming the bound it passes, in time and memory
proportional to the bound, not to what the spec would expand to: spec text is measured
before it is parsed, nesting and node counts while the YAML is composed (aliases counted
at their expanded size, so a "billion laughs" stops at the first level past the bound),
a spec message by its encoded size before it is decoded, and a ``when`` expression by
its length before it is tokenized and by its nesting while it is parsed.
docs/workflows.md lists them.
"""

from __future__ import annotations

# spec_text in UTF-8 bytes; a WorkflowSpec message by its encoded (wire) size.
MAX_SPEC_BYTES = 256 * 1024
# Nesting of mappings and lists (the top-level mapping is level 1), aliases expanded. 32, not
# more: a run answers with its spec as a Run message, where each level of a stage's params is
# two protobuf levels (a Struct and its Value), and protobuf decoders stop at 100 levels, the
# host's own ParseDict and every client's: at 64 a spec deep in its params was stored and run,
# and then CreateRun, GetRun and ListRuns answered INTERNAL for it.
MAX_SPEC_DEPTH = 32
# Mappings, lists and scalars (mapping keys included) after alias expansion.
MAX_SPEC_NODES = 100_000
# Characters of all scalars (mapping keys included) after alias expansion: without aliases
# a spec holds at most MAX_SPEC_BYTES of them, so this only bounds what aliases repeat.
MAX_SPEC_EXPANDED_CHARS = 1024 * 1024
# A stage's `when` expression, in UTF-8 bytes.
MAX_WHEN_BYTES = 4 * 1024
# Nesting of a `when` expression: parentheses, `not`, `len(...)` and [lists] each add a level.
MAX_WHEN_DEPTH = 64

__all__ = [
    "MAX_SPEC_BYTES",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_EXPANDED_CHARS",
    "MAX_SPEC_NODES",
    "MAX_WHEN_BYTES",
    "MAX_WHEN_DEPTH",
]

"""The host config's ``[workflows]`` table: how many runs may be active, and how long ended
runs are kept."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ether_host.config import ConfigError

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class WorkflowSettings:
    max_active_runs: int = 100
    # Ended runs kept, newest first; older ones are deleted with their tasks and events.
    # 0 keeps every one (the store then grows without bound).
    keep_runs: int = 1000
    # Ended runs created longer ago than this are deleted; 0 keeps them whatever their age.
    keep_days: float = 30.0

    def created_before(self, now: float) -> float:
        """The creation time (epoch seconds) before which an ended run is deleted."""
        return now - self.keep_days * SECONDS_PER_DAY if self.keep_days else 0.0


def parse_settings(table: Mapping[str, Any]) -> WorkflowSettings:
    """ConfigError, naming the key, for an unknown key or a value out of range."""
    allowed = ("max_active_runs", "keep_runs", "keep_days")
    for key in table:
        if key not in allowed:
            raise ConfigError(
                f"workflows: unknown key {key!r}; allowed keys are {', '.join(allowed)}"
            )
    defaults = WorkflowSettings()
    max_active = table.get("max_active_runs", defaults.max_active_runs)
    if not _is_int(max_active) or max_active < 1:
        raise ConfigError(
            f"workflows.max_active_runs: expected a positive integer, got {max_active!r}"
        )
    keep_runs = table.get("keep_runs", defaults.keep_runs)
    if not _is_int(keep_runs) or keep_runs < 0:
        raise ConfigError(
            f"workflows.keep_runs: expected an integer of 0 (keep every run) or more, "
            f"got {keep_runs!r}"
        )
    keep_days = table.get("keep_days", defaults.keep_days)
    if (
        not isinstance(keep_days, int | float)
        or isinstance(keep_days, bool)
        or not math.isfinite(keep_days)
        or keep_days < 0
    ):
        raise ConfigError(
            f"workflows.keep_days: expected a number of days, 0 (no age limit) or more, "
            f"got {keep_days!r}"
        )
    return WorkflowSettings(max_active, keep_runs, float(keep_days))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

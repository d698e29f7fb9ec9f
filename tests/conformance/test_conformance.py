"""Every scenario of vectors/ against every language's conformance agent (README.md).

Each case spawns the language's conformance agent as the host would, plays the vector's frames,
and fails with a report (step, mismatch, last frames, stderr tail) when the agent deviates.
"""

from __future__ import annotations

import pytest

from .driver import Scenario, ScenarioFailure, load_scenarios, run_scenario
from .languages import LANGUAGES, Prepared, peer_for

SCENARIOS = load_scenarios()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
@pytest.mark.parametrize("language", LANGUAGES)
def test_conformance(language: str, scenario: Scenario, prepared: dict[str, Prepared]) -> None:
    """The language's agent produces exactly the frames, exit codes and stderr the vector says."""
    target = prepared[language]
    if target.status == "absent":
        pytest.skip(f"absent: {target.detail}")
    if target.status == "build_failed":
        pytest.fail(
            f"the {language} conformance agent did not build:\n{target.detail}", pytrace=False
        )
    peer = peer_for(language, prepared) if scenario.data.get("peers") else None
    failure = None
    try:
        run_scenario(scenario, target, peer)
    except ScenarioFailure as exc:
        failure = str(exc)
    if failure is not None:  # outside the except: the report is the message, not a chain
        pytest.fail(failure, pytrace=False)

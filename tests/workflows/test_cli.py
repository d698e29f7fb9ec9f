"""`ether workflow run` and `ether workflow watch` as a user runs them: live progress on stderr,
the report on stdout or in a file, and the run's outcome as the exit status."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from ether.v1 import workflow_pb2
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ETHER, HostProcess
from tests.workflows.runs import create, follow_until, logged, started, wait

ROOT = Path(__file__).resolve().parents[2]


def ether(host: HostProcess, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), "workflow", *args, "--address", host.address],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_run_writes_the_markdown_report_and_exits_zero(
    host: HostProcess, flow: str, tmp_path: Path
) -> None:
    """A run that succeeds: bars and task lines on stderr, the report in --output, exit 0."""
    spec = tmp_path / "chain.yaml"
    spec.write_text("""\
name: cli-chain
stages:
  - {name: count, agent: flow, action: numbers, params: {n: 3}}
  - {name: double, agent: flow, action: double, input_from: count.data.items, parallel: true}
  - {name: sum, agent: flow, action: total, input_from: double.data.*.value, reduce: true}
""")
    output = tmp_path / "report.md"
    done = ether(host, "run", str(spec), "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert "✓ double" in done.stderr and "SUCCEEDED" in done.stderr
    assert f"report written to {output}" in done.stderr
    report = output.read_text()
    assert report.startswith("# Workflow report: cli-chain")
    assert "| double | SUCCEEDED | 3 | 3 | 0 | 0 |" in report
    assert done.stdout == ""


def test_run_prints_json_report_on_stdout(host: HostProcess, flow: str, tmp_path: Path) -> None:
    """--format json prints the JSON report on stdout, so it can be piped."""
    spec = tmp_path / "one.yaml"
    spec.write_text(
        "name: cli-json\nstages:\n  - {name: a, agent: flow, action: double, inputs: [4]}\n"
    )
    done = ether(host, "run", str(spec), "--format", "json", "--quiet")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["summary"]["state"] == "SUCCEEDED"
    assert document["tasks"][0]["data"] == {"value": 8}


def test_failed_and_partial_runs_exit_non_zero(
    host: HostProcess, flow: str, tmp_path: Path
) -> None:
    """A failed run exits 1, a partial one 3; the failed task's error is on stderr."""
    failing = tmp_path / "fail.yaml"
    failing.write_text(
        "name: cli-fail\nstages:\n  - {name: a, agent: flow, action: fail, params: {code: nope}}\n"
    )
    done = ether(host, "run", str(failing), "--no-report")
    assert done.returncode == 1
    assert "nope: it broke" in done.stderr and "FAILED" in done.stderr
    partial = tmp_path / "partial.yaml"
    partial.write_text(
        "name: cli-partial\nstages:\n"
        "  - {name: a, agent: flow, action: fail, inputs: [1], on_failure: continue}\n"
    )
    assert ether(host, "run", str(partial), "--no-report").returncode == 3


def test_bad_spec_exits_two_with_the_violations(
    host: HostProcess, flow: str, tmp_path: Path
) -> None:
    """An invalid spec is refused before anything runs: exit 2, each violation on its own line."""
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\nstages:\n  - {name: a, agent: flow, action: nope}\n")
    done = ether(host, "run", str(spec))
    assert done.returncode == 2
    assert "INVALID_ARGUMENT" in done.stderr
    assert "stages[0].action: line 3, column 28: agent 'flow' has no action 'nope'" in done.stderr
    missing = ether(host, "run", str(tmp_path / "absent.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_watch_attaches_to_a_running_run(host: HostProcess, flow: str) -> None:
    """watch follows a run already under way to its end and exits with its outcome."""
    tag = f"watch-{uuid.uuid4().hex[:8]}"
    run = create(
        host,
        f"""\
name: cli-watch
stages:
  - {{name: first, agent: flow, action: step, inputs: [1]}}
  - {{name: wait, agent: flow, action: step, inputs: [{{hold: {tag}}}]}}
""",
    )
    follow_until(host, run.id, started(1, "wait"))
    logged(host, flow, "holding", {tag})
    watcher = subprocess.Popen(
        [str(ETHER), "workflow", "watch", run.id, "--address", host.address, "--no-report"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stderr is not None
        first_line = watcher.stderr.readline()
        assert f"attached to run {run.id}" in first_line
        host.workflows.CancelRun(
            workflow_pb2.CancelRunRequest(run_id=run.id, reason="enough"), timeout=10
        )
        _, rest = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 1
    assert "CANCELLED" in rest and "enough" in rest


def test_watch_a_finished_run(host: HostProcess, flow: str, tmp_path: Path) -> None:
    """watch on an ended run prints its summary and report at once."""
    spec = tmp_path / "w.yaml"
    spec.write_text(
        "name: cli-watched\nstages:\n  - {name: a, agent: flow, action: double, inputs: [1]}\n"
    )
    first = ether(host, "run", str(spec), "--format", "json", "--quiet")
    run_id = json.loads(first.stdout)["run"]["id"]
    done = ether(host, "watch", run_id, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run"]["id"] == run_id


def test_code_review_campaign_example(host: HostProcess, tmp_path: Path) -> None:
    """The README's example: scout (Python), wordcount (Go) and report (TypeScript) in one run,
    with the report written to a file."""
    for name in ("scout", "wordcount", "report"):
        deploy(host, EXAMPLES / name)
    output = tmp_path / "report.md"
    done = ether(host, "run", "examples/workflows/code_review.yaml", "--output", str(output))
    assert done.returncode == 0, done.stderr
    report = output.read_text()
    assert "| explore | SUCCEEDED | 5 | 5 | 0 | 0 |" in report
    assert "| analyze | SUCCEEDED | 15 | 15 | 0 | 0 |" in report
    assert "| report | SUCCEEDED | 1 | 1 | 0 | 0 |" in report
    assert "wordcount.count" in report and "scout.search_content" in report
    assert "### Code review campaign" in report  # the TypeScript agent's rendering, under "Result"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("max_active_runs = 0", "workflows.max_active_runs: expected a positive integer, got 0"),
        (
            "keep_runs = -1",
            "workflows.keep_runs: expected an integer of 0 (keep every run) or more, got -1",
        ),
        (
            "keep_days = 'a week'",
            "workflows.keep_days: expected a number of days, 0 (no age limit) or more, got 'a week'",
        ),
        (
            "keep_hours = 3",
            "workflows: unknown key 'keep_hours'; allowed keys are max_active_runs, keep_runs, keep_days",
        ),
    ],
)
def test_bad_workflows_config_refuses_to_start(tmp_path: Path, table: str, message: str) -> None:
    """A bad [workflows] table stops `ether serve` at once with exit 2, naming the key."""
    config = tmp_path / "ether.toml"
    config.write_text(f"[workflows]\n{table}\n")
    done = subprocess.run(
        [
            str(ETHER),
            "serve",
            "--config",
            str(config),
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_ls_cancel_and_report(host: HostProcess, flow: str, tmp_path: Path) -> None:
    """ls lists runs with their state (filtered by --state), cancel ends a running one, and
    report prints or writes an ended run's report."""
    tag = f"cancel-{uuid.uuid4().hex[:8]}"
    run = create(
        host,
        f"name: cli-cancel\nstages:\n  - {{name: wait, agent: flow, action: step, "
        f"inputs: [{{hold: {tag}}}]}}\n",
    )
    follow_until(host, run.id, started(1, "wait"))
    logged(host, flow, "holding", {tag})
    running = ether(host, "ls", "--state", "running").stdout.splitlines()
    assert running[0].split() == ["ID", "NAME", "STATE", "TASKS", "CREATED"]
    assert any(line.split()[:3] == [run.id, "cli-cancel", "RUNNING"] for line in running)

    cancelled = ether(host, "cancel", run.id, "--reason", "not needed")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(f"{run.id}: ")
    wait(host, run.id)
    listed = ether(host, "ls", "--state", "cancelled").stdout
    assert run.id in listed and run.id not in ether(host, "ls", "--state", "running").stdout
    as_json = json.loads(ether(host, "ls", "--state", "cancelled", "-o", "json").stdout)
    assert isinstance(as_json, list)
    listed_run = next(r for r in as_json if r["id"] == run.id)
    assert (listed_run["name"], listed_run["state"]) == ("cli-cancel", "RUN_STATE_CANCELLED")

    printed = ether(host, "report", run.id, "--format", "json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["run"]["id"] == run.id
    written = tmp_path / "cancelled.md"
    assert ether(host, "report", run.id, "--output", str(written)).returncode == 0
    assert "CANCELLED" in written.read_text()
    missing = ether(host, "report", "run-nope")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr

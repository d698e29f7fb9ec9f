import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationMs, formatDuration, normalizeStatus, renderFindings, renderWorkflow } from "./render.js";

describe("renderFindings", () => {
  it("renders a summary table by severity and a section per finding, worst first", () => {
    const out = renderFindings({
      title: "Repo audit",
      summary: "Three things to look at.",
      findings: [
        { title: "TODO markers", severity: "low", file: "src/a.ts", detail: "4 TODOs." },
        { title: "Secret in config", severity: "Critical", file: "config|prod.yaml", data: { line: 3, key: "token" } },
        { title: "Large file", severity: "low" },
      ],
    });
    assert.equal(
      out.markdown,
      [
        "# Repo audit",
        "",
        "Three things to look at.",
        "",
        "## Summary",
        "",
        "| Severity | Findings |",
        "| --- | ---: |",
        "| critical | 1 |",
        "| low | 2 |",
        "| **total** | **3** |",
        "",
        "## Findings",
        "",
        "### 1. Secret in config",
        "",
        "**Severity:** critical · **File:** `config|prod.yaml`",
        "",
        "```json",
        '{\n  "key": "token",\n  "line": 3\n}',
        "```",
        "",
        "### 2. TODO markers",
        "",
        "**Severity:** low · **File:** `src/a.ts`",
        "",
        "4 TODOs.",
        "",
        "### 3. Large file",
        "",
        "**Severity:** low",
        "",
      ].join("\n"),
    );
    assert.deepEqual(out.sections.map((s) => [s.index, s.title, s.severity]), [
      [1, "Secret in config", "critical"],
      [2, "TODO markers", "low"],
      [3, "Large file", "low"],
    ]);
    assert.deepEqual(out.counts, { critical: 1, low: 2 });
  });

  it("is deterministic: key order in data does not change the output", () => {
    const a = renderFindings({ findings: [{ title: "x", data: { b: 1, a: [{ d: 1, c: 2 }] } }] });
    const b = renderFindings({ findings: [{ title: "x", data: { a: [{ c: 2, d: 1 }], b: 1 } }] });
    assert.equal(a.markdown, b.markdown);
  });

  it("says so when there are no findings, and names untitled ones", () => {
    assert.match(renderFindings({ findings: [] }).markdown, /^# Report\n\n## Summary\n\nNo findings\.\n$/);
    const out = renderFindings({ findings: [{ file: "a.py" }, {}] });
    assert.deepEqual(out.sections.map((s) => s.title), ["a.py", "Finding 2"]);
    assert.deepEqual(out.counts, { info: 2 });
  });
});

describe("renderWorkflow", () => {
  it("renders a summary table and a section per task from AgentOutput JSON", () => {
    const out = renderWorkflow({
      title: "Nightly",
      results: [
        { task_id: "t-1", agent: "scout", action: "explore_directory", status: "TASK_STATUS_SUCCESS", data: { summary: "12 files.", total_files: 12 }, metadata: { duration: "1.250s", cost: 0.002 } },
        { taskId: "t-2", agent: "wordcount", action: "count", status: "TASK_STATUS_ERROR", error: { code: "timeout", message: "too slow" }, metadata: { duration: "0.004s" } },
        { name: "render", status: "partial", result: "half", error: { code: "budget_exceeded", message: "stopped" } },
      ],
    });
    assert.deepEqual(out.totals, { tasks: 3, ok: 1, error: 1, partial: 1, unknown: 0, cost: 0.002 });
    assert.deepEqual(out.sections, [
      { index: 1, task: "t-1", status: "ok" },
      { index: 2, task: "t-2", status: "error" },
      { index: 3, task: "render", status: "partial" },
    ]);
    assert.match(out.markdown, /^# Nightly\n\n## Summary\n\n3 tasks, 1 ok, 1 partial, 1 failed, cost \$0\.0020\.\n/);
    assert.match(out.markdown, /\| 1 \| t-1 \| scout\.explore_directory \| ✅ ok \| 1\.25 s \| \$0\.0020 \|/);
    assert.match(out.markdown, /\| 2 \| t-2 \| wordcount\.count \| ❌ error \| 4 ms \| — \|/);
    assert.match(out.markdown, /### 2\. t-2\n\n\*\*Status:\*\* ❌ error · \*\*Agent:\*\* `wordcount\.count` · \*\*Duration:\*\* 4 ms\n\n> \*\*timeout\*\*: too slow\n/);
    assert.match(out.markdown, /### 1\. t-1[\s\S]*12 files\.\n\n```json\n\{\n  "summary": "12 files\.",\n  "total_files": 12\n\}\n```/);
  });

  it("reads statuses and durations in the shapes the host and agents use", () => {
    assert.equal(normalizeStatus({ status: 1 }), "ok");
    assert.equal(normalizeStatus({ status: "failed" }), "error");
    assert.equal(normalizeStatus({ error: { code: "x" } }), "error");
    assert.equal(normalizeStatus({}), "unknown");
    assert.equal(durationMs({ duration: "2s" }), 2000);
    assert.equal(durationMs({ duration_ms: 5 }), 5);
    assert.equal(formatDuration(undefined), "—");
    assert.equal(formatDuration(0.2), "< 1 ms");
    assert.equal(formatDuration(125_000), "2 min 5 s");
  });

  it("renders an empty workflow", () => {
    assert.equal(renderWorkflow({ results: [] }).markdown, "# Workflow report\n\n## Summary\n\n0 tasks, 0 ok, 0 failed.\n");
  });
});

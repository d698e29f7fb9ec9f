// One workflow run: a progress bar per stage, tasks as they complete, cancel and resume, and the
// Markdown report once the run has ended. Live from StreamRunEvents.
import {
  errorText,
  isCancel,
  ReportFormat,
  RunState,
  RunTaskState,
  StageState,
  workflows,
  type Run,
  type TaskCounts,
} from "../api.js";
import { h, setText, show } from "../dom.js";
import { renderMarkdown } from "../markdown.js";
import { followLive } from "../live.js";
import type { Page } from "../router.js";
import { runStateName } from "./workflows.js";

const ENDED = new Set([RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED, RunState.CANCELLED, RunState.INTERRUPTED]);
const MAX_TASK_LINES = 200;

interface StageRow {
  bar: HTMLProgressElement;
  label: HTMLElement;
  state: HTMLElement;
}

function done(counts: TaskCounts | undefined): [number, number] {
  if (!counts) return [0, 0];
  return [counts.succeeded + counts.failed + counts.cancelled, counts.total];
}

export const runDetailPage: Page = (main, signal, runId = "") => {
  const title = h("h1", {}, `Run ${runId}`);
  show(main, title, h("p", { class: "muted", role: "status" }, "Loading…"));
  const state = h("p", { role: "status", id: "run-state" });
  const problem = h("p", { class: "error", role: "alert" });
  const stages = h("div", { class: "stages" });
  const tasks = h("ol", { class: "mono tasks", "aria-label": "Completed tasks", tabindex: "0" });
  const tasksSection = h("section", { "aria-label": "Tasks" }, h("h2", {}, "Tasks as they complete"), tasks);
  const reportTitle = h("h2", { hidden: true }, "Report");
  const report = h("article", { class: "card report", id: "report", "aria-label": "Report", hidden: true });
  const cancel = h("button", { type: "button", id: "cancel-run", hidden: true }, "Cancel run");
  const resume = h("button", { type: "button", id: "resume-run", hidden: true }, "Resume run");
  // Whether the run's events are followed, or being reconnected to; empty once the run ended.
  const live = h("span", { class: "muted run-live", role: "status", id: "run-live" });
  const rows = new Map<string, StageRow>();
  let reportShown = false;

  const stageRow = (name: string): StageRow => {
    let row = rows.get(name);
    if (!row) {
      const bar = h("progress", { max: 1, value: 0, "aria-label": `${name} progress` });
      const label = h("span", { class: "progress-label" });
      const stageState = h("span", { class: "state stage-state" });
      const section = h("div", { class: "card", "data-stage": name }, h("div", { class: "row" }, h("strong", {}, name), stageState, label), bar);
      stages.appendChild(section);
      row = { bar, label, state: stageState };
      rows.set(name, row);
    }
    return row;
  };
  const showStage = (name: string, counts: TaskCounts | undefined, stageState?: StageState) => {
    const row = stageRow(name);
    const [finished, total] = done(counts);
    const percent = total ? Math.round((100 * finished) / total) : stageState === StageState.SUCCEEDED ? 100 : 0;
    row.bar.max = 100;
    row.bar.value = percent;
    setText(row.label, `${finished}/${total} tasks · ${percent} %`);
    row.label.dataset.percent = String(percent);
    if (stageState !== undefined) setText(row.state, (StageState[stageState] ?? "").replace("STAGE_STATE_", ""));
  };
  const showRun = async (run: Run) => {
    setText(title, `Run ${run.name || run.id}`);
    setText(state, `${runStateName(run.state)} · ${run.tasks?.succeeded ?? 0}/${run.tasks?.total ?? 0} tasks succeeded${run.tasks?.failed ? `, ${run.tasks.failed} failed` : ""}${run.error ? ` · ${run.error.message}` : ""}`);
    state.dataset.state = runStateName(run.state);
    for (const stage of run.stages) showStage(stage.name, stage.tasks, stage.state);
    const ended = ENDED.has(run.state);
    cancel.hidden = ended;
    // ResumeRun continues only a run a host restart cut short; any other ended run is final.
    resume.hidden = run.state !== RunState.INTERRUPTED;
    if (ended && !reportShown) {
      reportShown = true;
      const found = await workflows.getRunReport({ runId: run.id, format: ReportFormat.MARKDOWN }, { signal });
      report.replaceChildren(renderMarkdown(found.content));
      report.hidden = false;
      reportTitle.hidden = false;
    }
  };
  cancel.addEventListener("click", async () => {
    try {
      await workflows.cancelRun({ runId, reason: "cancelled from the console" }, { signal });
    } catch (error) {
      setText(problem, errorText(error));
    }
  });
  resume.addEventListener("click", async () => {
    try {
      reportShown = false;
      report.hidden = true;
      reportTitle.hidden = true;
      const resumed = await workflows.resumeRun({ runId }, { signal });
      if (resumed.run) await showRun(resumed.run);
      void follow(resumed.run?.lastSequence ?? 0n);
    } catch (error) {
      setText(problem, errorText(error));
    }
  });

  // The run's events for as long as it runs and the page is open. Broken (the host restarted),
  // the stream is opened again: first the run as it is now (a restart leaves it INTERRUPTED),
  // then its events after the last one shown.
  const follow = async (after: bigint) => {
    let last = after;
    let reopened = false;
    try {
      await followLive({
        signal,
        catchUp: async () => {
          if (!reopened) {
            reopened = true;
            return false;
          }
          const found = (await workflows.getRun({ runId }, { signal })).run;
          if (!found) return false;
          await showRun(found);
          return ENDED.has(found.state);
        },
        open: () => workflows.streamRunEvents({ runId, afterSequence: last }, { signal }),
        each: async (item) => {
          last = item.sequence;
          const event = item.event;
          if (event.case === "stageStarted") showStage(event.value.stage, undefined, StageState.RUNNING);
          else if (event.case === "stageProgress") showStage(event.value.stage, event.value.tasks);
          else if (event.case === "stageCompleted") showStage(event.value.stage, event.value.tasks, event.value.state);
          else if (event.case === "taskCompleted" && event.value.task) {
            const task = event.value.task;
            // At the bottom, so nothing shown moves; the box follows the newest unless scrolled up.
            const atBottom = tasks.scrollTop + tasks.clientHeight >= tasks.scrollHeight - 4;
            tasks.appendChild(h("li", {}, `${task.stage} · ${task.agent}.${task.action} · ${(RunTaskState[task.state] ?? "").replace("RUN_TASK_STATE_", "").toLowerCase()}`));
            while (tasks.childElementCount > MAX_TASK_LINES) tasks.firstElementChild?.remove();
            if (atBottom) tasks.scrollTop = tasks.scrollHeight;
          } else if (event.case === "runCompleted" || event.case === "runStarted" || event.case === "runResumed") {
            const found = (await workflows.getRun({ runId }, { signal })).run;
            if (found) await showRun(found);
            if (event.case === "runCompleted") return true;
          }
          return false;
        },
        live: () => {
          live.dataset.live = "true";
          setText(live, "Following");
        },
        lost: (attempt) => {
          live.dataset.live = "false";
          setText(live, `Connection lost; reconnecting (attempt ${attempt})…`);
        },
      });
      if (!signal.aborted) {
        delete live.dataset.live;
        setText(live, "");
      }
    } catch (error) {
      if (!isCancel(error)) setText(problem, errorText(error));
    }
  };

  (async () => {
    let run;
    try {
      run = (await workflows.getRun({ runId }, { signal })).run;
    } catch (error) {
      if (!isCancel(error)) show(main, title, h("p", { class: "error", role: "alert" }, errorText(error)));
      return;
    }
    if (!run) return;
    show(
      main,
      h("p", {}, h("a", { href: "#/workflows" }, "← Workflows")),
      title,
      state,
      problem,
      h("div", { class: "row run-controls" }, cancel, resume, live),
      h("h2", {}, "Stages"),
      stages,
      // Tasks only while there are tasks to come; the report last, where its arrival pushes
      // nothing down.
      ENDED.has(run.state) && run.state !== RunState.INTERRUPTED ? null : tasksSection,
      reportTitle,
      report,
    );
    try {
      await showRun(run);
    } catch (error) {
      if (!isCancel(error)) setText(problem, errorText(error));
    }
    if (!ENDED.has(run.state)) await follow(run.lastSequence);
  })();
};

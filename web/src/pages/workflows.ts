// Workflow runs: the list with state and task counts, and a new run from pasted YAML (errors
// shown at their line).
import { errorText, isCancel, RunState, workflows, type Run } from "../api.js";
import { h, setText, show } from "../dom.js";
import { go, type Page } from "../router.js";

export function runStateName(state: RunState): string {
  return (RunState[state] ?? "").replace("RUN_STATE_", "");
}

/** The YAML with line numbers, the line an error names marked. */
function linesAround(text: string, message: string): HTMLElement | null {
  const found = /line (\d+)/.exec(message);
  if (!found) return null;
  const wanted = Number(found[1]);
  const lines = text.split("\n");
  const first = Math.max(1, wanted - 3);
  const last = Math.min(lines.length, wanted + 3);
  const shown = [];
  for (let n = first; n <= last; n++) {
    const line = `${String(n).padStart(4)} ${n === wanted ? ">" : " "} ${lines[n - 1] ?? ""}\n`;
    shown.push(n === wanted ? h("mark", {}, line) : line);
  }
  return h("pre", { "aria-label": `The spec around line ${wanted}`, id: "spec-error-lines" }, ...shown);
}

export const workflowsPage: Page = (main, signal) => {
  const status = h("p", { class: "muted", role: "status" }, "Loading runs…");
  const body = h("tbody");
  const spec = h("textarea", { id: "spec", name: "spec", rows: 14, spellcheck: false, placeholder: "name: my-run\nstages:\n  - name: ..." });
  const problem = h("div", { class: "error", role: "alert", id: "spec-error" });
  const form = h(
    "form",
    { class: "schema", "aria-label": "New run" },
    h("label", {}, h("span", { class: "field-name" }, "Workflow spec (YAML)"), spec),
    problem,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", class: "primary", value: "start" }, "Start run"),
      h("button", { type: "submit", value: "check", id: "check-spec" }, "Check only"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const check = (event.submitter as HTMLButtonElement | null)?.value === "check";
    problem.replaceChildren();
    try {
      const made = await workflows.createRun({ specSource: { case: "specText", value: spec.value }, validateOnly: check }, { signal });
      if (check) problem.replaceChildren(h("span", { class: "muted" }, "The spec is valid."));
      else if (made.run) go(`#/workflows/${encodeURIComponent(made.run.id)}`);
    } catch (error) {
      if (isCancel(error)) return;
      const text = errorText(error);
      problem.replaceChildren(h("p", {}, text), linesAround(spec.value, text) ?? "");
    }
  });
  show(
    main,
    h("h1", {}, "Workflows"),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Runs" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Run"),
            h("th", { scope: "col" }, "State"),
            h("th", { scope: "col", class: "num" }, "Tasks done"),
            h("th", { scope: "col", class: "num" }, "Failed"),
            h("th", { scope: "col", class: "hide-narrow" }, "Started"),
          ),
        ),
        body,
      ),
    ),
    h("h2", {}, "New run"),
    form,
  );
  const row = (run: Run) =>
    h(
      "tr",
      { "data-run": run.id },
      h("th", { scope: "row" }, h("a", { href: `#/workflows/${encodeURIComponent(run.id)}` }, run.name || run.id)),
      h("td", { class: "state" }, runStateName(run.state)),
      h("td", { class: "num" }, `${run.tasks?.succeeded ?? 0}/${run.tasks?.total ?? 0}`),
      h("td", { class: "num" }, run.tasks?.failed ?? 0),
      h("td", { class: "hide-narrow" }, run.createdAt ? new Date(Number(run.createdAt.seconds) * 1000).toLocaleString() : ""),
    );
  const refresh = async () => {
    const listed = await workflows.listRuns({ pageSize: 100 }, { signal });
    body.replaceChildren(...listed.runs.map(row));
    setText(status, listed.runs.length ? `${listed.runs.length} runs` : "No runs yet.");
  };
  refresh().catch((error: unknown) => {
    if (!isCancel(error)) status.replaceChildren(h("span", { class: "error" }, errorText(error)));
  });
  // Runs have no list-wide stream: the list is re-read every 3 s while the tab is visible.
  const poll = setInterval(() => {
    if (document.visibilityState === "visible") void refresh().catch(() => undefined);
  }, 3000);
  signal.addEventListener("abort", () => clearInterval(poll));
};

// Run an action: a form from its params schema, ExecuteStream with the task's progress and log
// as they come, and the output as JSON with a copy button.
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { agents, errorText, isCancel, supervisor, TaskStatus } from "../api.js";
import { h, setText, show } from "../dom.js";
import { pretty } from "../format.js";
import { followLive, isFinal } from "../live.js";
import type { Page } from "../router.js";
import { buildField } from "../schema_form.js";

export const runPage: Page = (main, signal, agentName = "", actionName = "") => {
  const title = h("h1", {}, `Run ${agentName}.${actionName}`);
  show(main, title, h("p", { class: "muted", role: "status" }, "Loading…"));
  (async () => {
    let info;
    try {
      info = (await agents.getAgent({ name: agentName }, { signal })).agent;
    } catch (error) {
      if (!isCancel(error)) show(main, title, h("p", { class: "error", role: "alert" }, errorText(error)));
      return;
    }
    const action = info?.actions.find((a) => a.name === actionName);
    if (!info || !action) {
      show(main, title, h("p", { class: "error", role: "alert" }, `${agentName} has no action ${actionName}`));
      return;
    }
    const schema = (action.paramsSchema ?? { type: "object" }) as Record<string, unknown>;
    const form = buildField("", { ...schema, type: "object" }, true);
    const run = h("button", { type: "submit", class: "primary" }, "Run");
    const cancel = h("button", { type: "button", disabled: true }, "Cancel");
    const summary = h("p", { class: "error", role: "alert" });
    const bar = h("progress", { max: 1, "aria-label": "Progress" });
    bar.removeAttribute("value"); // indeterminate until the agent reports progress
    const progressLabel = h("div", { class: "progress-label", "aria-live": "polite" });
    const log = h("pre", { class: "log", "aria-label": "Task log", hidden: true });
    const output = h("pre", { "aria-label": "Output", id: "output", tabindex: "0" });
    const outputState = h("p", { role: "status" });
    const copy = h("button", { type: "button" }, "Copy output");
    const result = h("section", { "aria-label": "Result", hidden: true }, h("h2", {}, "Output"), outputState, output, h("div", { class: "row" }, copy));
    const progress = h("section", { "aria-label": "Task", hidden: true }, h("h2", {}, "Task"), bar, progressLabel, log);
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(output.textContent ?? "");
        setText(copy, "Copied");
      } catch {
        const range = document.createRange();
        range.selectNodeContents(output);
        getSelection()?.removeAllRanges();
        getSelection()?.addRange(range);
        setText(copy, "Selected: press Ctrl+C");
      }
    });
    let running: AbortController | null = null;
    cancel.addEventListener("click", () => running?.abort());
    const formElement = h(
      "form",
      { class: "schema", novalidate: true, "aria-label": `${actionName} params` },
      action.description ? h("p", {}, action.description) : null,
      form.element,
      summary,
      h("div", { class: "row" }, run, cancel),
    );
    formElement.addEventListener("submit", async (event) => {
      event.preventDefault();
      const errors: string[] = [];
      const params = form.read(errors);
      setText(summary, errors.length ? `Fix ${errors.length === 1 ? "this field" : "these fields"}: ${errors.join("; ")}` : "");
      if (errors.length) {
        formElement.querySelector<HTMLElement>("[aria-invalid=true]")?.focus();
        return;
      }
      running = new AbortController();
      const stop = () => running?.abort();
      signal.addEventListener("abort", stop);
      run.disabled = true;
      cancel.disabled = false;
      progress.hidden = false;
      result.hidden = true;
      log.hidden = true;
      log.replaceChildren();
      bar.removeAttribute("value");
      setText(progressLabel, "Starting…");
      delete progressLabel.dataset.lost;
      // When the host started: after a broken stream, a later start means it restarted.
      const hostStarted = await hostStartedAt(signal);
      let taskId = "";
      try {
        const stream = agents.executeStream(
          { input: { agent: agentName, action: actionName, params: params as Record<string, never> } },
          { signal: running.signal },
        );
        for await (const item of stream) {
          const event = item.event;
          taskId = item.taskId || taskId;
          if (event.case === "started") {
            setText(progressLabel, `Running (task ${item.taskId}, pid ${event.value.pid})`);
          } else if (event.case === "progress") {
            const { progress: done, total, message } = event.value;
            if (total > 0) {
              bar.max = total;
              bar.value = Math.min(done, total);
            }
            setText(progressLabel, `${total > 0 ? `${Math.round((100 * done) / total)} %` : ""} ${message}`.trim());
          } else if (event.case === "log") {
            log.hidden = false;
            log.appendChild(document.createTextNode(`${event.value.level} ${event.value.message}\n`));
          } else if (event.case === "output") {
            const out = event.value;
            bar.max = 1;
            bar.value = 1;
            result.hidden = false;
            if (out.status === TaskStatus.ERROR && out.error) {
              outputState.className = "error";
              setText(outputState, `The task failed: ${out.error.message} (${out.error.code})`);
              setText(output, pretty(out.error.details ?? {}));
            } else {
              outputState.className = "muted";
              const duration = out.metadata?.duration;
              const seconds = duration ? Number(duration.seconds) + duration.nanos / 1e9 : undefined;
              const took = seconds === undefined ? "" : seconds < 1 ? ` in ${Math.round(seconds * 1000)} ms` : ` in ${seconds.toFixed(2)} s`;
              setText(outputState, `${TaskStatus[out.status].replace("TASK_STATUS_", "").toLowerCase()}${took}`);
              // data is a google.protobuf.Value (a message in protobuf-es): its JSON is the value.
              setText(output, pretty(out.data ? toJson(ValueSchema, out.data) : null));
            }
            setText(progressLabel, "Done");
          }
        }
      } catch (error) {
        setText(progressLabel, "");
        if (running?.signal.aborted || isFinal(error)) setText(summary, errorText(error));
        else await lostTask(taskId, hostStarted, error, progressLabel, running?.signal ?? signal);
      } finally {
        signal.removeEventListener("abort", stop);
        run.disabled = false;
        cancel.disabled = true;
        running = null;
      }
    });
    show(
      main,
      h("p", {}, h("a", { href: `#/agents/${encodeURIComponent(agentName)}` }, `← ${agentName}`)),
      title,
      formElement,
      progress,
      result,
    );
    formElement.querySelector<HTMLElement>("input, select, textarea")?.focus();
  })();
};

function millis(time: { seconds: bigint; nanos: number } | undefined): bigint | undefined {
  return time ? time.seconds * 1000n + BigInt(Math.floor(time.nanos / 1e6)) : undefined;
}

async function hostStartedAt(signal: AbortSignal): Promise<bigint | undefined> {
  try {
    return millis((await supervisor.getHostInfo({}, { signal })).host?.startedAt);
  } catch {
    return undefined; // no agent.read right: the page cannot tell a restart
  }
}

/** The stream of a running task broke. An Execute cannot be resumed: this page waits for the
 * host to answer again (live.ts's back-off) and says what it knows — the task's id, and whether
 * the host restarted meanwhile — not how the task ended, which it cannot know. */
async function lostTask(
  taskId: string,
  hostStarted: bigint | undefined,
  error: unknown,
  label: HTMLElement,
  signal: AbortSignal,
): Promise<void> {
  const task = taskId ? `task ${taskId}` : "the task (its id had not come yet)";
  label.dataset.lost = "true";
  setText(label, `Connection lost while ${task} ran (${errorText(error)}); waiting for the host…`);
  try {
    await followLive({
      signal,
      catchUp: async () => {
        let now: bigint | undefined;
        try {
          now = millis((await supervisor.getHostInfo({}, { signal })).host?.startedAt);
        } catch (failure) {
          if (!isFinal(failure)) throw failure; // not back yet: followLive tries again
          now = undefined; // it answers, but not this caller (no agent.read)
        }
        const restarted = now !== undefined && hostStarted !== undefined && now !== hostStarted;
        const at = now === undefined ? "" : ` at ${new Date(Number(now)).toLocaleTimeString()}`;
        label.dataset.restarted = String(restarted);
        setText(
          label,
          restarted
            ? `The host restarted${at} while ${task} ran. An Execute cannot be resumed, and this page cannot tell how the task ended; run it again if that is safe.`
            : `The connection was lost while ${task} ran${hostStarted === undefined ? "" : "; the host did not restart"}. An Execute cannot be resumed, and this page cannot tell how the task ended.`,
        );
        return true;
      },
      open: () => {
        throw new Error("unreachable: catchUp ends the following");
      },
      each: () => true,
      live: () => undefined,
      lost: (attempt) => setText(label, `Connection lost while ${task} ran; waiting for the host (attempt ${attempt})…`),
    });
  } catch (failure) {
    if (!isCancel(failure)) setText(label, `Connection lost while ${task} ran: ${errorText(failure)}`);
  }
}

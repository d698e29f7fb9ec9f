// One agent: its actions with their schemas, its processes, and its log following live.
import { agents, errorText, isCancel, supervisor, type AgentInfo } from "../api.js";
import { h, setText, show } from "../dom.js";
import { languageName, pretty, stateName } from "../format.js";
import { followLive } from "../live.js";
import type { Page } from "../router.js";

const MAX_LOG_LINES = 2000;

export const agentPage: Page = (main, signal, name = "") => {
  show(main, h("h1", {}, name), h("p", { class: "muted", role: "status" }, "Loading…"));
  (async () => {
    let info;
    try {
      info = (await agents.getAgent({ name }, { signal })).agent;
    } catch (error) {
      if (!isCancel(error)) show(main, h("h1", {}, name), h("p", { class: "error", role: "alert" }, errorText(error)));
      return;
    }
    if (!info) return;
    const processes = h("tbody");
    const log = h("pre", { class: "log", "aria-label": `${name} log`, "aria-live": "off", tabindex: "0" });
    const logStatus = h("p", { class: "muted", role: "status", id: "log-status" }, "Connecting…");
    // The header's state and replicas: re-read when the log's stream reopens (a restart or a
    // scale meanwhile changes them; the page follows no agent events of its own).
    const stateBadge = h("span", { id: "agent-state" });
    const replicas = h("span", { id: "agent-replicas" });
    const showHeader = (found: AgentInfo) => {
      stateBadge.className = `state state-${stateName(found.state)}`;
      setText(stateBadge, stateName(found.state));
      setText(replicas, `${found.readyReplicas}/${found.replicas} replicas`);
    };
    showHeader(info);
    show(
      main,
      h("h1", {}, info.name),
      h(
        "p",
        {},
        stateBadge,
        ` · ${languageName(info.language)}`,
        info.version ? ` · ${info.version}` : "",
        " · ",
        replicas,
      ),
      info.description ? h("p", {}, info.description) : null,
      h("h2", {}, "Actions"),
      h(
        "div",
        { class: "actions" },
        ...info.actions.map((action) =>
          h(
            "section",
            { class: "card", "aria-label": action.name },
            h(
              "div",
              { class: "row" },
              h("strong", { class: "mono" }, action.name),
              action.idempotent ? h("span", { class: "badge" }, "idempotent") : null,
              h(
                "a",
                { class: "button", href: `#/run/${encodeURIComponent(info.name)}/${encodeURIComponent(action.name)}` },
                "Run",
              ),
            ),
            action.description ? h("p", {}, action.description) : null,
            action.unusable ? h("p", { class: "error" }, action.unusable) : null,
            h("details", {}, h("summary", {}, "Params schema"), h("pre", {}, pretty(action.paramsSchema ?? {}))),
            action.resultSchema ? h("details", {}, h("summary", {}, "Result schema"), h("pre", {}, pretty(action.resultSchema))) : null,
          ),
        ),
      ),
      h("h2", {}, "Processes"),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { "aria-label": "Processes" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Replica"),
              h("th", { scope: "col" }, "PID"),
              h("th", { scope: "col" }, "State"),
              h("th", { scope: "col", class: "num" }, "In flight"),
              h("th", { scope: "col", class: "num" }, "Restarts"),
              h("th", { scope: "col", class: "hide-narrow" }, "Reason"),
            ),
          ),
          processes,
        ),
      ),
      h("h2", {}, "Log (live)"),
      logStatus,
      log,
    );
    const showProcesses = async () => {
      const listed = await supervisor.listProcesses({ agent: name, pageSize: 1000 }, { signal });
      processes.replaceChildren(
        ...listed.processes.map((p) =>
          h(
            "tr",
            {},
            h("td", {}, p.replica),
            h("td", { class: "mono" }, p.pid),
            h("td", { class: `state state-${stateName(p.state)}` }, stateName(p.state)),
            h("td", { class: "num" }, p.inFlight),
            h("td", { class: "num" }, p.restarts),
            h("td", { class: "hide-narrow" }, p.reason),
          ),
        ),
      );
    };
    // The log follows for as long as the page is open. Broken (the host restarted), the stream is
    // opened again with the last 200 lines, and those already shown (read at or before the last
    // shown line's time) are skipped: the lines written meanwhile appear once.
    let opened = false; // the header was read with the page; re-read on each reopening
    let lastTime = -1n;
    let atLastTime = new Set<string>();
    const nanos = (time: { seconds: bigint; nanos: number } | undefined) =>
      time ? time.seconds * 1_000_000_000n + BigInt(time.nanos) : 0n;
    try {
      await followLive({
        signal,
        catchUp: async () => {
          if (opened) {
            const found = (await agents.getAgent({ name }, { signal })).agent;
            if (found) showHeader(found);
          }
          opened = true;
          await showProcesses();
        },
        open: () => supervisor.streamLogs({ agent: name, tailLines: 200, follow: true }, { signal }),
        each: (line) => {
          const at = nanos(line.time);
          const key = `${line.pid} ${line.source} ${line.message}`;
          if (at < lastTime || (at === lastTime && atLastTime.has(key))) return;
          if (at > lastTime) {
            lastTime = at;
            atLastTime = new Set();
          }
          atLastTime.add(key);
          const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
          log.appendChild(document.createTextNode(`[${line.replica}] ${line.level ? `${line.level} ` : ""}${line.message}\n`));
          while (log.childNodes.length > MAX_LOG_LINES) log.firstChild?.remove();
          if (atBottom) log.scrollTop = log.scrollHeight;
        },
        live: () => {
          logStatus.dataset.live = "true";
          setText(logStatus, "Following");
        },
        lost: (attempt) => {
          logStatus.dataset.live = "false";
          setText(logStatus, `Connection lost; reconnecting (attempt ${attempt})…`);
        },
      });
    } catch (error) {
      if (!isCancel(error)) log.appendChild(h("span", { class: "error" }, `${errorText(error)}\n`));
    }
  })();
};

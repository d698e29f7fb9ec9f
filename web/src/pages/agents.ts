// The agents directory: state, language, replicas, in-flight tasks and restarts, live from
// WatchEvents (each event refreshes the rows from ListAgents and ListProcesses).
import { agents, errorText, isCancel, supervisor, type AgentInfo } from "../api.js";
import { h, setText, show } from "../dom.js";
import { languageName, stateName } from "../format.js";
import { followLive } from "../live.js";
import type { Page } from "../router.js";

interface Row {
  row: HTMLTableRowElement;
  cells: Record<"state" | "language" | "replicas" | "inFlight" | "restarts", HTMLTableCellElement>;
}

export const agentsPage: Page = (main, signal) => {
  const status = h("p", { class: "muted", role: "status" }, "Loading agents…");
  const body = h("tbody");
  const table = h(
    "table",
    { "aria-label": "Agents", class: "fixed" },
    // Fixed column widths (style.css): a state or count changing its width moves no column.
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Agent"),
        h("th", { scope: "col", class: "col-state" }, "State"),
        h("th", { scope: "col", class: "hide-narrow col-language" }, "Language"),
        h("th", { scope: "col", class: "num col-count" }, "Replicas"),
        h("th", { scope: "col", class: "num col-count" }, "In flight"),
        h("th", { scope: "col", class: "num col-count hide-narrow" }, "Restarts"),
      ),
    ),
    body,
  );
  show(main, h("h1", {}, "Agents"), status, h("div", { class: "table-wrap" }, table));
  const rows = new Map<string, Row>();
  let live = false; // WatchEvents is open; while it is not, the status says it is reconnecting

  const render = (list: AgentInfo[], restarts: Map<string, number>) => {
    const seen = new Set<string>();
    for (const agent of list) {
      seen.add(agent.name);
      let row = rows.get(agent.name);
      if (!row) {
        const cell = (extra: Record<string, string> = {}) => h("td", extra);
        const cells = {
          state: cell(),
          language: cell({ class: "hide-narrow" }),
          replicas: cell({ class: "num" }),
          inFlight: cell({ class: "num" }),
          restarts: cell({ class: "num hide-narrow" }),
        };
        const tr = h(
          "tr",
          { "data-agent": agent.name },
          h("th", { scope: "row" }, h("a", { href: `#/agents/${encodeURIComponent(agent.name)}` }, agent.name)),
          cells.state,
          cells.language,
          cells.replicas,
          cells.inFlight,
          cells.restarts,
        );
        row = { row: tr, cells };
        rows.set(agent.name, row);
        // Rows stay where they are while the page is open (ListAgents' name order on the first
        // render, then a new agent joins at the bottom): a row put between others would push
        // every row below it down under the reader's eyes. A reload sorts them again.
        body.appendChild(tr);
      }
      const state = stateName(agent.state);
      setText(row.cells.state, state);
      row.cells.state.className = `state state-${state}`;
      setText(row.cells.language, languageName(agent.language));
      setText(row.cells.replicas, `${agent.readyReplicas}/${agent.replicas}`);
      setText(row.cells.inFlight, String(agent.inFlight));
      setText(row.cells.restarts, String(restarts.get(agent.name) ?? 0));
    }
    for (const [name, row] of rows) {
      if (!seen.has(name)) {
        row.row.remove();
        rows.delete(name);
      }
    }
    if (live) setText(status, list.length ? `${list.length} agents, live` : "No agents on this host.");
  };

  let refreshing: Promise<void> | null = null;
  let again = false;
  const refresh = async (): Promise<void> => {
    if (refreshing) {
      again = true;
      return refreshing;
    }
    refreshing = (async () => {
      do {
        again = false;
        const [listed, processes] = await Promise.all([
          agents.listAgents({ pageSize: 1000 }, { signal }),
          supervisor.listProcesses({ pageSize: 1000 }, { signal }),
        ]);
        const restarts = new Map<string, number>();
        for (const p of processes.processes) restarts.set(p.agent, (restarts.get(p.agent) ?? 0) + p.restarts);
        render(listed.agents, restarts);
      } while (again && !signal.aborted);
    })().finally(() => {
      refreshing = null;
    });
    return refreshing;
  };

  // In-flight counts change with tasks, which are no lifecycle events: a light poll keeps them
  // current while the page is open (the events keep states and replicas immediate).
  const poll = setInterval(() => {
    if (document.visibilityState === "visible") void refresh().catch(() => undefined);
  }, 2000);
  signal.addEventListener("abort", () => clearInterval(poll));

  // WatchEvents for as long as the page is open: broken (the host restarted), it is opened again
  // and the rows re-read, so the page catches up without a reload.
  followLive({
    signal,
    catchUp: async () => {
      await refresh();
    },
    open: () => supervisor.watchEvents({ afterSequence: -1n }, { signal }),
    each: () => {
      void refresh().catch((error: unknown) => {
        if (!isCancel(error)) status.replaceChildren(h("span", { class: "error" }, errorText(error)));
      });
    },
    live: () => {
      live = true;
      status.dataset.live = "true";
      setText(status, rows.size ? `${rows.size} agents, live` : "No agents on this host.");
    },
    lost: (attempt) => {
      live = false;
      status.dataset.live = "false";
      setText(status, `Connection lost; reconnecting (attempt ${attempt})…`);
    },
  }).catch((error: unknown) => {
    if (!isCancel(error)) status.replaceChildren(h("span", { class: "error" }, errorText(error)));
  });
};

// Terminals: the list, live from WatchTerminals, and a form to create one.
import { errorText, isCancel, terminals, TerminalState, type Terminal } from "../api.js";
import { h, setText, show } from "../dom.js";
import { followLive } from "../live.js";
import { go, type Page } from "../router.js";

function stateOf(terminal: Terminal): string {
  return (TerminalState[terminal.state] ?? "").replace("TERMINAL_STATE_", "");
}

export const terminalsPage: Page = (main, signal) => {
  const status = h("p", { class: "muted", role: "status", id: "terminals-status" }, "Loading terminals…");
  const body = h("tbody");
  const command = h("input", { type: "text", id: "new-command", name: "command", value: "bash", autocomplete: "off" });
  const name = h("input", { type: "text", id: "new-name", name: "name", autocomplete: "off" });
  const problem = h("p", { class: "error", role: "alert" });
  const create = h(
    "form",
    { class: "schema", "aria-label": "New terminal" },
    h("label", {}, h("span", { class: "field-name" }, "Command"), command),
    h("label", {}, h("span", { class: "field-name" }, "Name (optional)"), name),
    problem,
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Create terminal")),
  );
  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    setText(problem, "");
    try {
      const made = await terminals.createTerminal(
        { command: { case: "commandLine", value: command.value }, name: name.value, rows: 30, cols: 100 },
        { signal },
      );
      if (made.terminal) go(`#/terminals/${encodeURIComponent(made.terminal.id)}`);
    } catch (error) {
      if (!isCancel(error)) setText(problem, errorText(error));
    }
  });
  show(
    main,
    h("h1", {}, "Terminals"),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Terminals" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Terminal"),
            h("th", { scope: "col" }, "State"),
            h("th", { scope: "col", class: "hide-narrow" }, "Command"),
            h("th", { scope: "col", class: "hide-narrow" }, "Owner"),
            h("th", { scope: "col", class: "num" }, "Viewers"),
          ),
        ),
        body,
      ),
    ),
    h("h2", {}, "New terminal"),
    create,
  );
  const refresh = async () => {
    const listed = await terminals.listTerminals({ pageSize: 1000 }, { signal });
    body.replaceChildren(
      ...listed.terminals.map((t) =>
        h(
          "tr",
          { "data-terminal": t.id },
          h("th", { scope: "row" }, h("a", { href: `#/terminals/${encodeURIComponent(t.id)}` }, t.name || t.id)),
          h("td", { class: "state" }, stateOf(t)),
          h("td", { class: "mono hide-narrow" }, t.argv.join(" ")),
          h("td", { class: "hide-narrow" }, t.owner),
          h("td", { class: "num" }, t.attachedClients),
        ),
      ),
    );
    if (live) setText(status, listed.terminals.length ? `${listed.terminals.length} terminals, live` : "No terminals yet.");
    return listed.terminals.length;
  };
  // WatchTerminals for as long as the page is open: broken (the host restarted), it is opened
  // again and the list re-read first (terminals do not survive a restart; new ones may be there).
  let live = false;
  let count = 0;
  followLive({
    signal,
    catchUp: async () => {
      count = await refresh();
    },
    open: () => terminals.watchTerminals({}, { signal }),
    each: async () => {
      count = await refresh();
    },
    live: () => {
      live = true;
      status.dataset.live = "true";
      setText(status, count ? `${count} terminals, live` : "No terminals yet.");
    },
    lost: (attempt) => {
      live = false;
      status.dataset.live = "false";
      setText(status, `Connection lost; reconnecting (attempt ${attempt})…`);
    },
  }).catch((error: unknown) => {
    if (isCancel(error)) return;
    delete status.dataset.live;
    status.replaceChildren(h("span", { class: "error" }, errorText(error)));
  });
};

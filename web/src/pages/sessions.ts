// Sessions: the list, and opening one with a gateway agent (by name or capability).
import { errorText, gateway, isCancel, SessionState } from "../api.js";
import { h, setText, show } from "../dom.js";
import { go, type Page } from "../router.js";

export const sessionsPage: Page = (main, signal) => {
  const status = h("p", { class: "muted", role: "status" }, "Loading sessions…");
  const body = h("tbody");
  const target = h("input", { type: "text", id: "session-target", name: "target", value: "concierge", autocomplete: "off" });
  const kind = h(
    "select",
    { id: "session-kind", name: "kind" },
    h("option", { value: "capability" }, "capability"),
    h("option", { value: "agent" }, "agent"),
  );
  const problem = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { class: "schema", "aria-label": "Open a session" },
    h("label", {}, h("span", { class: "field-name" }, "With the gateway agent of this"), kind),
    h("label", {}, h("span", { class: "field-name" }, "Name"), target),
    problem,
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Open session")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    setText(problem, "");
    try {
      const opened = await gateway.openSession(
        { target: { case: kind.value === "agent" ? "agent" : "capability", value: target.value.trim() } },
        { signal },
      );
      if (opened.session) go(`#/sessions/${encodeURIComponent(opened.session.id)}`);
    } catch (error) {
      if (!isCancel(error)) setText(problem, errorText(error));
    }
  });
  show(
    main,
    h("h1", {}, "Sessions"),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Sessions" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Session"),
            h("th", { scope: "col" }, "Agent"),
            h("th", { scope: "col" }, "State"),
            h("th", { scope: "col", class: "num" }, "Turns"),
            h("th", { scope: "col", class: "hide-narrow" }, "Owner"),
          ),
        ),
        body,
      ),
    ),
    h("h2", {}, "Open a session"),
    form,
  );
  (async () => {
    try {
      const listed = await gateway.listSessions({ pageSize: 100 }, { signal });
      body.replaceChildren(
        ...listed.sessions.map((s) =>
          h(
            "tr",
            { "data-session": s.id },
            h("th", { scope: "row" }, h("a", { href: `#/sessions/${encodeURIComponent(s.id)}` }, s.id)),
            h("td", {}, s.agent),
            h("td", { class: "state" }, (SessionState[s.state] ?? "").replace("SESSION_STATE_", "")),
            h("td", { class: "num" }, s.turns),
            h("td", { class: "hide-narrow" }, s.owner),
          ),
        ),
      );
      setText(status, listed.sessions.length ? `${listed.sessions.length} sessions` : "No sessions yet.");
    } catch (error) {
      if (!isCancel(error)) status.replaceChildren(h("span", { class: "error" }, errorText(error)));
    }
  })();
};

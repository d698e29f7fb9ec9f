// Egress audit: the newest decisions (ListAudit), then each new one as it is made (WatchAudit,
// from the newest id shown, so none is missed or shown twice).
import { AuditDecision, errorText, gateway, isCancel, type AuditRecord } from "../api.js";
import { h, setText, show } from "../dom.js";
import { followLive } from "../live.js";
import type { Page } from "../router.js";

const MAX_ROWS = 500;

function row(record: AuditRecord): HTMLTableRowElement {
  const decision = (AuditDecision[record.decision] ?? "").replace("AUDIT_DECISION_", "");
  const when = record.time ? new Date(Number(record.time.seconds) * 1000).toLocaleTimeString() : "";
  return h(
    "tr",
    { "data-audit": String(record.id), "data-decision": decision },
    h("td", { class: "hide-narrow" }, when),
    h("td", {}, record.agent),
    h("td", { class: `state state-${decision === "ALLOWED" ? "RUNNING" : "FATAL"}` }, decision),
    h("td", { class: "mono" }, `${record.method} ${record.url}`),
    h("td", {}, record.reason || (record.statusCode ? String(record.statusCode) : "")),
    h("td", { class: "hide-narrow" }, record.rule),
  );
}

export const auditPage: Page = (main, signal) => {
  const status = h("p", { class: "muted", role: "status", id: "audit-status" }, "Loading the audit log…");
  const body = h("tbody");
  show(
    main,
    h("h1", {}, "Egress audit"),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Egress decisions" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col", class: "hide-narrow" }, "Time"),
            h("th", { scope: "col" }, "Agent"),
            h("th", { scope: "col" }, "Decision"),
            h("th", { scope: "col" }, "Request"),
            h("th", { scope: "col" }, "Reason or status"),
            h("th", { scope: "col", class: "hide-narrow" }, "Rule"),
          ),
        ),
        body,
      ),
    ),
  );
  // The newest decisions, then WatchAudit from the newest id shown for as long as the page is
  // open. Broken (the host restarted), it is opened again from that id: the host replays what was
  // recorded meanwhile (the audit log survives a restart), and nothing shown comes twice.
  let newest = -1n; // not read yet
  let count = 0;
  followLive({
    signal,
    catchUp: async () => {
      if (newest >= 0n) return;
      const listed = await gateway.listAudit({ pageSize: 100 }, { signal });
      body.replaceChildren(...listed.records.map(row));
      count = listed.records.length;
      newest = listed.records[0]?.id ?? 0n;
    },
    open: () => gateway.watchAudit({ afterId: newest }, { signal }),
    each: (item) => {
      if (!item.record || item.record.id <= newest) return;
      newest = item.record.id;
      body.prepend(row(item.record));
      while (body.childElementCount > MAX_ROWS) body.lastElementChild?.remove();
    },
    live: () => {
      status.dataset.live = "true";
      setText(status, `${count ? `${count} newest decisions` : "No decisions yet"}; new ones appear at the top as they are made`);
    },
    lost: (attempt) => {
      status.dataset.live = "false";
      setText(status, `Connection lost; reconnecting (attempt ${attempt})…`);
    },
  }).catch((error: unknown) => {
    if (isCancel(error)) return;
    delete status.dataset.live;
    status.replaceChildren(h("span", { class: "error" }, errorText(error)));
  });
};

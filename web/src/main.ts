// The console's entry: hash routes to pages; a host that refuses the caller sends it to the
// sign-in form. Built by build.mjs into dist/main.js.
import { errorText, isUnauthenticated, setToken, supervisor, token } from "./api.js";
import { h, show } from "./dom.js";
import { agentPage } from "./pages/agent.js";
import { auditPage } from "./pages/audit.js";
import { agentsPage } from "./pages/agents.js";
import { playbackPage } from "./pages/playback.js";
import { runPage } from "./pages/run.js";
import { runDetailPage } from "./pages/run_detail.js";
import { sessionPage } from "./pages/session.js";
import { sessionsPage } from "./pages/sessions.js";
import { signInPage } from "./pages/signin.js";
import { terminalPage } from "./pages/terminal.js";
import { terminalsPage } from "./pages/terminals.js";
import { workflowsPage } from "./pages/workflows.js";
import { go, render, route } from "./router.js";

route(/^\/agents$/, "agents", agentsPage);
route(/^\/agents\/([^/]+)$/, "agents", agentPage);
route(/^\/run\/([^/]+)\/([^/]+)$/, "agents", runPage);
route(/^\/terminals$/, "terminals", terminalsPage);
route(/^\/terminals\/([^/]+)$/, "terminals", terminalPage);
route(/^\/terminals\/([^/]+)\/playback$/, "terminals", playbackPage);
route(/^\/workflows$/, "workflows", workflowsPage);
route(/^\/workflows\/([^/]+)$/, "workflows", runDetailPage);
route(/^\/sessions$/, "sessions", sessionsPage);
route(/^\/sessions\/([^/]+)$/, "sessions", sessionPage);
route(/^\/audit$/, "audit", auditPage);
route(/^\/sign-in$/, "", signInPage);

function showWho(): void {
  const who = document.getElementById("who");
  if (!who) return;
  if (token()) {
    const out = h("button", { type: "button" }, "Sign out");
    out.addEventListener("click", () => {
      setToken("");
      go("#/sign-in");
    });
    show(who, "Signed in · ", out);
  } else {
    show(who);
  }
}

// "Skip to content" moves the focus to the page without touching the hash (the route).
document.querySelector<HTMLAnchorElement>("a.skip")?.addEventListener("click", (event) => {
  event.preventDefault();
  document.getElementById("main")?.focus();
});

async function start(): Promise<void> {
  // One call says whether this host lets the tab in as it is (no auth, or a kept token).
  try {
    await supervisor.getHostInfo({});
  } catch (error) {
    if (isUnauthenticated(error)) {
      setToken("");
      const next = location.hash && !location.hash.startsWith("#/sign-in") ? location.hash : "#/agents";
      location.hash = `#/sign-in?next=${encodeURIComponent(next)}`;
    } else {
      const main = document.getElementById("main") as HTMLElement;
      show(main, h("h1", {}, "Ether"), h("p", { class: "error", role: "alert" }, `The host did not answer: ${errorText(error)}`));
      return;
    }
  }
  window.addEventListener("hashchange", () => {
    showWho();
    render();
  });
  showWho();
  render();
}

void start();

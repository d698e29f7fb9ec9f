// bench/console.py: the terminal flood of drive.mjs's `flood` scenario, in a Chromium driven over
// a bare DevTools pipe instead of playwright-core. Playwright turns on the DevTools Network
// domain in every page it drives, and Chromium then copies every WebSocket frame it receives,
// payload included, to the DevTools client (here node): a cost of the measuring, which a
// person's browser does not pay (the bench reports both). This driver turns on no domain: it
// navigates, presses Enter and evaluates scripts, nothing else.
//
// `node flood_cdp.mjs` with a JSON config on stdin ({chromium, base, terminal, budget_ms});
// prints one JSON line: {ok, seconds, receivedSeconds, bytes, lagMs} as drive.mjs's flood.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const config = JSON.parse(Buffer.concat(chunks).toString());
const budget = config.budget_ms ?? 60000;
const profile = await mkdtemp(path.join(tmpdir(), "ether-flood-cdp-"));
// The switches playwright-core passes that bear on a page working flat out (no background
// throttling), and drive.mjs's own.
const browser = spawn(
  config.chromium,
  [
    "--headless",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--hide-scrollbars",
    "--window-size=1280,800",
    "--remote-debugging-pipe",
    `--user-data-dir=${profile}`,
    "about:blank",
  ],
  { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] },
);

// The DevTools protocol over fds 3 (to Chromium) and 4 (from it): JSON messages ended by NUL.
let nextId = 0;
const waiting = new Map();
let unread = "";
browser.stdio[4].on("data", (data) => {
  unread += data.toString();
  let end;
  while ((end = unread.indexOf("\0")) >= 0) {
    const message = JSON.parse(unread.slice(0, end));
    unread = unread.slice(end + 1);
    const reply = waiting.get(message.id);
    if (reply) {
      waiting.delete(message.id);
      reply(message);
    }
  }
});
function send(method, params = {}, sessionId = undefined) {
  const id = ++nextId;
  browser.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  return new Promise((resolve, reject) =>
    waiting.set(id, (message) => (message.error ? reject(new Error(`${method}: ${message.error.message}`)) : resolve(message.result))),
  );
}

let sessionId;
async function evaluate(expression) {
  const { result, exceptionDetails } = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, sessionId);
  if (exceptionDetails) throw new Error(exceptionDetails.exception?.description ?? exceptionDetails.text);
  return result.value;
}
/** Until the page's `condition` (an expression) holds, checked as the DOM changes. */
function until(condition, what) {
  return evaluate(`new Promise((resolve, reject) => {
    const check = () => { if (${condition}) { observer.disconnect(); clearTimeout(timer); resolve(true); } };
    const observer = new MutationObserver(check);
    observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    const timer = setTimeout(() => { observer.disconnect(); reject(new Error(${JSON.stringify(`waited ${budget} ms for ${what}`)})); }, ${budget});
    check();
  })`);
}
async function key(name, code, text) {
  const base = { key: name, code, windowsVirtualKeyCode: code === "Enter" ? 13 : 0 };
  await send("Input.dispatchKeyEvent", { type: "keyDown", ...base, text }, sessionId);
  await send("Input.dispatchKeyEvent", { type: "keyUp", ...base }, sessionId);
}

try {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  ({ sessionId } = await send("Target.attachToTarget", { targetId, flatten: true }));
  await send("Page.navigate", { url: `${config.base}/#/terminals/${encodeURIComponent(config.terminal)}` }, sessionId);
  await until(`document.querySelector("#terminal[data-attached=true]")`, "the terminal to attach");
  await evaluate(`(() => {
    window.etherTerminal.focus();
    window.benchLag = 0;
    let last = performance.now();
    window.benchTimer = setInterval(() => {
      const now = performance.now();
      window.benchLag = Math.max(window.benchLag, now - last - 50);
      last = now;
    }, 50);
    window.benchStart = performance.now();
    window.etherTerminalStats.bytes = 0;
  })()`);
  await key("Enter", "Enter", "\r");
  await until(`(document.querySelector("#terminal-status")?.textContent ?? "").includes("The program ended")`, "the program to end");
  const flood = await evaluate(`new Promise((resolve) =>
    window.etherTerminal.write("", () => {
      clearInterval(window.benchTimer);
      resolve({
        seconds: (performance.now() - window.benchStart) / 1000,
        receivedSeconds: (window.etherTerminalStats.lastAt - window.benchStart) / 1000,
        bytes: window.etherTerminalStats.bytes,
        lagMs: window.benchLag,
      });
    }))`);
  process.stdout.write(JSON.stringify({ ok: true, ...flood }) + "\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + "\n");
  process.exitCode = 1;
} finally {
  // Browser.close lets Chromium end its processes and stop writing its profile; a kill after 10 s
  // if it has not. Then the profile goes (retried: a child may still be closing a file in it).
  const exited = new Promise((resolve) => (browser.exitCode !== null ? resolve() : browser.once("exit", resolve)));
  send("Browser.close").catch(() => {});
  const killer = setTimeout(() => browser.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(killer);
  await rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}

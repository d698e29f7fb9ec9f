// Drives the console in Debian's Chromium (playwright-core, no browser download) for one
// scenario of tests/web/test_console.py: `node drive.mjs SCENARIO` with a JSON config on stdin
// ({base, screenshots, ...}); prints one JSON line of what the page showed. Every wait is on
// something the page shows, with a budget (config.budget_ms); a missed wait fails the scenario
// with what the page showed instead.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const scenario = process.argv[2];
// stdin: the config as the first line, then "DONE" each time the test has finished the step a
// READY asked for (tests/web/support.py), for scenarios that must wait for it (stepDone()).
const input = createInterface({ input: process.stdin });
const stdinLines = input[Symbol.asyncIterator]();
const config = JSON.parse((await stdinLines.next()).value);
/** Print READY and wait until the test says its step is done. */
async function stepDone() {
  process.stdout.write("READY\n");
  const { value, done } = await stdinLines.next();
  if (done || value.trim() !== "DONE") throw new Error(`the test ended its step with ${JSON.stringify(value)}`);
}
const budget = config.budget_ms ?? 60000;
const shots = [];

async function shot(page, name, fullPage = true) {
  const path = `${config.screenshots}/${name}.png`;
  await page.screenshot({ path, fullPage });
  shots.push(path);
}

/** The text of the xterm.js buffer of a page (its active buffer, every line). */
async function terminalText(page) {
  return page.evaluate(() => {
    const term = window.etherTerminal;
    if (!term) return "";
    const buffer = term.buffer.active;
    const lines = [];
    for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i)?.translateToString(true) ?? "");
    return lines.join("\n");
  });
}

async function waitTerminalLine(page, line) {
  await page.waitForFunction(
    (wanted) => {
      const term = window.etherTerminal;
      if (!term) return false;
      const buffer = term.buffer.active;
      for (let i = 0; i < buffer.length; i++) {
        if ((buffer.getLine(i)?.translateToString(true) ?? "").trim() === wanted) return true;
      }
      return false;
    },
    line,
    { timeout: budget },
  );
}

/** Seconds xterm.js on `page` takes to parse the file at `path` written from the page itself in
 * 512 KiB writes, its newlines made CRLF as the terminal's line discipline does: the flood's own
 * bytes without the host or the bridge (bench/console.py). */
async function parseAlone(page, path) {
  const { readFile } = await import("node:fs/promises");
  const text = (await readFile(path)).toString("latin1").replaceAll("\n", "\r\n");
  await page.evaluate(() => (window.benchCorpus = []));
  const piece = 1 << 20;
  for (let at = 0; at < text.length; at += piece) {
    const base64 = Buffer.from(text.slice(at, at + piece), "latin1").toString("base64");
    await page.evaluate((data) => window.benchCorpus.push(Uint8Array.from(atob(data), (c) => c.charCodeAt(0))), base64);
  }
  return page.evaluate(
    () =>
      new Promise((resolve) => {
        const started = performance.now();
        for (const part of window.benchCorpus) {
          for (let at = 0; at < part.length; at += 512 * 1024) window.etherTerminal.write(part.subarray(at, at + 512 * 1024));
        }
        window.etherTerminal.write("", () => resolve((performance.now() - started) / 1000));
      }),
  );
}

/** Two animation frames after the page's pending work: its layout, and the shifts it caused, are
 * reported (the Layout Instability API reports a frame's shifts after the frame). */
async function settled(page) {
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
}

/** From now on, every layout shift the page reports (buffered: shifts of frames not yet
 * reported are not lost), with the elements that moved and where from and to. */
async function watchShifts(page) {
  await page.evaluate(() => {
    const from = performance.now();
    const describe = (node) => {
      if (!node) return "?";
      const element = node.nodeType === 1 ? node : node.parentElement;
      if (!element) return "?";
      const id = element.id ? `#${element.id}` : "";
      const classes = typeof element.className === "string" && element.className ? `.${element.className.trim().split(/\s+/).join(".")}` : "";
      return `${element.tagName.toLowerCase()}${id}${classes} "${(element.textContent ?? "").trim().slice(0, 40)}"`;
    };
    const box = (r) => [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)];
    window.etherShifts = [];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.startTime < from) continue;
        window.etherShifts.push({
          value: entry.value,
          hadRecentInput: entry.hadRecentInput,
          sources: entry.sources.map((s) => ({ node: describe(s.node), from: box(s.previousRect), to: box(s.currentRect) })),
        });
      }
    }).observe({ type: "layout-shift", buffered: true });
  });
}

async function shiftsSince(page) {
  return page.evaluate(() => window.etherShifts);
}

/** What a person would see wrong on the page as it is: the page scrolling sideways; one of
 * ``selectors`` (the heading, the main controls) missing, outside the window's width, cut off by
 * a scrolling or clipping box around it, or covered by something else; an element whose content
 * overflows its box (a table too wide for its container must scroll in it, not spill out). */
async function layoutProblems(page, selectors) {
  const problems = [];
  const overall = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  if (overall[0] > overall[1]) problems.push(`the page scrolls sideways: ${overall[0]} px wide in a ${overall[1]} px window`);
  for (const selector of selectors) {
    const element = page.locator(selector).first();
    if ((await element.count()) === 0) {
      problems.push(`${selector}: not on the page`);
      continue;
    }
    await element.evaluate((el) => el.scrollIntoView({ block: "center", inline: "nearest" }));
    const problem = await element.evaluate((el) => {
      const width = window.innerWidth;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) return "not shown";
      if (r.left < -0.5 || r.right > width + 0.5) return `outside the window: ${Math.round(r.left)}..${Math.round(r.right)} of ${width} px`;
      for (let up = el.parentElement; up && up !== document.documentElement; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (style.overflowX === "visible" && style.overflowY === "visible") continue;
        const around = up.getBoundingClientRect();
        if (r.left < around.left - 0.5 || r.right > around.right + 0.5) {
          return `cut off by ${up.tagName.toLowerCase()}.${up.className}: ${Math.round(r.left)}..${Math.round(r.right)} in ${Math.round(around.left)}..${Math.round(around.right)}`;
        }
      }
      // Covered: what is at the middle of the element's part in the window is not it.
      const top = Math.max(r.top, 0);
      const bottom = Math.min(r.bottom, window.innerHeight);
      const x = (r.left + r.right) / 2;
      const y = (top + bottom) / 2;
      const hit = document.elementFromPoint(x, y);
      if (!hit || !(el === hit || el.contains(hit))) return `covered at (${Math.round(x)}, ${Math.round(y)}) by ${hit ? hit.tagName.toLowerCase() + "." + hit.className : "nothing"}`;
      return "";
    });
    if (problem) problems.push(`${selector}: ${problem}`);
  }
  const spills = await page.evaluate(() => {
    const found = [];
    for (const el of document.querySelectorAll("body *")) {
      if (el.closest(".xterm")) continue; // xterm.js lays out its own rows
      const style = getComputedStyle(el);
      if (style.display === "inline" || style.display === "none" || style.display === "contents") continue;
      if (style.overflowX !== "visible") continue; // a scrolling box: wide content scrolls in it
      if (el.clientWidth === 0) continue;
      if (el.scrollWidth > el.clientWidth + 1) {
        const classes = typeof el.className === "string" && el.className ? `.${el.className.trim().split(/\s+/).join(".")}` : "";
        found.push(`${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ""}${classes}: content ${el.scrollWidth} px wide in a ${el.clientWidth} px box ("${(el.textContent ?? "").trim().slice(0, 50)}")`);
      }
    }
    return found;
  });
  return [...problems, ...spills];
}

const scenarios = {
  // bench/console.py: from navigation to the agents page showing config.count agents RUNNING,
  // in a fresh context (cold) and on a reload (warm), config.rounds times each. The time is
  // the page's performance.now() (its origin is the navigation's start) when the rows show.
  async agents_load(browser) {
    const shown = async (page) => {
      const at = await page.waitForFunction(
        (count) => {
          let running = 0;
          for (const cell of document.querySelectorAll("tbody tr[data-agent] td.state")) {
            if (cell.textContent === "RUNNING") running += 1;
          }
          return running >= count ? performance.now() : false;
        },
        config.count,
        { timeout: budget, polling: "raf" },
      );
      return at.jsonValue();
    };
    const cold = [];
    const warm = [];
    for (let round = 0; round < config.rounds; round++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      await page.goto(`${config.base}/#/agents`, { waitUntil: "commit" });
      cold.push(await shown(page));
      if (round === 0) await shot(page, "agents-200", false);
      await page.reload({ waitUntil: "commit" });
      warm.push(await shown(page));
      await context.close();
    }
    return { cold, warm };
  },
  // A terminal recorded from its page: start recording, type, download the .cast with the
  // button, play it back (the playback page writes the events into its own xterm.js).
  async recording(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    const page = await context.newPage();
    await page.goto(`${config.base}/#/terminals/${encodeURIComponent(config.id)}`);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await page.locator("#recording-status").filter({ hasText: "Not recorded" }).waitFor({ timeout: budget });
    await page.click("#record");
    await page.locator("#recording-status").filter({ hasText: /^Recording/ }).waitFor({ timeout: budget });
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("echo played-$((6*7))");
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, "played-42");
    await shot(page, "terminal-recording");
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: budget }),
      page.click("#download-cast"),
    ]);
    const saved = `${config.screenshots}/${download.suggestedFilename()}`;
    await download.saveAs(saved);
    await page.click("#playback-link");
    await page.waitForFunction(() => window.etherPlayback?.done === true, null, { timeout: budget });
    await waitTerminalLine(page, "played-42");
    await shot(page, "playback");
    return {
      filename: download.suggestedFilename(),
      saved,
      playbackText: await terminalText(page),
      playbackStatus: await page.locator("#playback-status").textContent(),
      size: await page.evaluate(() => [window.etherTerminal.cols, window.etherTerminal.rows]),
    };
  },
  // The agents page lists the agents with their states, live; at desktop and phone widths.
  async agents(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/agents`);
    for (const name of config.agents) {
      await page.locator(`tr[data-agent="${name}"] td.state`).filter({ hasText: "RUNNING" }).waitFor({ timeout: budget });
    }
    const rows = await page.$$eval("tbody tr[data-agent]", (trs) =>
      trs.map((tr) => [...tr.querySelectorAll("th, td")].map((cell) => cell.textContent)),
    );
    await shot(page, "agents-1280");
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(page, "agents-390");
    await page.setViewportSize({ width: 1280, height: 800 });
    // By keyboard: the first Tab reaches "Skip to content", Enter moves to the page, and Tab
    // walks its links in order; Enter on an agent's opens its page.
    await page.keyboard.press("Tab");
    const firstTab = await page.evaluate(() => document.activeElement?.textContent);
    await page.keyboard.press("Enter");
    let tabs = 0;
    while ((await page.evaluate(() => document.activeElement?.getAttribute("href"))) !== `#/agents/${config.agents[0]}`) {
      await page.keyboard.press("Tab");
      if (++tabs > 20) throw new Error(`Tab never reached ${config.agents[0]}'s link`);
    }
    await page.keyboard.press("Enter");
    await page.locator("section.card").first().waitFor({ timeout: budget });
    await page.locator("table[aria-label=Processes] tbody tr").first().waitFor({ timeout: budget });
    await shot(page, "agent");
    const hash = await page.evaluate(() => location.hash);
    // Dark, as the system asks.
    const dark = await browser.newPage({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" });
    await dark.goto(`${config.base}/#/agents`);
    await dark.locator(`tr[data-agent="${config.agents[0]}"]`).waitFor({ timeout: budget });
    await shot(dark, "agents-dark");
    const background = await dark.evaluate(() => getComputedStyle(document.body).backgroundColor);
    return { rows, overflow, hash, firstTab, tabs, background };
  },

  // Run an action from its generated form: a required field left empty is refused at the field
  // before anything is sent; filled, the output comes back as JSON.
  async run(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/run/${config.agent}/${config.action}`);
    const form = page.locator("form.schema");
    await form.waitFor({ timeout: budget });
    await page.click("button[type=submit]");
    const fieldError = await page.locator(`[data-field="${config.field}"] .field-error`).textContent();
    const sentBeforeValid = await page.locator("#output").textContent();
    await page.fill(`[name="${config.field}"]`, config.value);
    await page.click("button[type=submit]");
    await page.waitForFunction(() => (document.querySelector("#output")?.textContent ?? "").length > 0, null, { timeout: budget });
    await page.getByText("Done").waitFor({ timeout: budget });
    await shot(page, "run");
    return {
      fieldError,
      sentBeforeValid,
      output: await page.locator("#output").textContent(),
      state: await page.locator("section[aria-label=Result] [role=status]").textContent(),
    };
  },

  // Every kind of field of a generated form: wrong values are refused at their fields before
  // anything is sent; right ones arrive at the agent as typed JSON.
  async form(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/run/${config.agent}/${config.action}`);
    await page.locator("form.schema").waitFor({ timeout: budget });
    await page.fill("[name=item]", "x");
    await page.fill("[name=quantity]", "11");
    await page.fill("[name=zip]", "12");
    await page.click("button[type=submit]");
    const errors = await page.$$eval("label.field.invalid", (labels) =>
      labels.map((label) => [label.dataset.field, label.querySelector(".field-error")?.textContent]),
    );
    const focused = await page.evaluate(() => document.activeElement?.getAttribute("name"));
    await shot(page, "form-errors", false);
    // Values of the wrong type: a fraction for an integer, text that is no number.
    await page.fill("[name=quantity]", "2.5");
    await page.locator("[name=price]").pressSequentially("1e");
    await page.click("button[type=submit]");
    const typeErrors = await page.$$eval("label.field.invalid", (labels) =>
      labels.map((label) => [label.dataset.field, label.querySelector(".field-error")?.textContent]),
    );
    const summary = await page.locator("form.schema [role=alert]").textContent();
    const sentWhileInvalid = await page.locator("#output").textContent();
    await shot(page, "form-type-errors", false);
    await page.fill("[name=price]", "");
    await page.fill("[name=item]", "tea");
    await page.fill("[name=quantity]", "3");
    await page.fill("[name=price]", "2.5");
    await page.check("[name=gift]");
    await page.selectOption("[name=speed]", { label: "express" });
    await page.click("text=Add to tags");
    await page.click("text=Add to tags");
    await page.fill("[name='tags[0]']", "green");
    await page.fill("[name='tags[1]']", "loose");
    await page.fill("[name=city]", "Lyon");
    await page.fill("[name=zip]", "69001");
    await page.click("button[type=submit]");
    await page.getByText("Done").waitFor({ timeout: budget });
    await shot(page, "form-run");
    return { errors, focused, typeErrors, summary, sentWhileInvalid, output: await page.locator("#output").textContent() };
  },

  // Create a terminal, type into xterm.js, and watch it from a second, read-only page.
  async terminal(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${config.base}/#/terminals`);
    await page.fill("#new-command", "bash --norc --noprofile");
    await page.click("form[aria-label='New terminal'] button[type=submit]");
    await page.waitForFunction(() => /^#\/terminals\/[^/?]+$/.test(location.hash), null, { timeout: budget });
    const id = decodeURIComponent((await page.evaluate(() => location.hash)).split("/")[2]);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("echo console-ok");
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, "console-ok");
    await shot(page, "terminal");

    const viewer = await context.newPage();
    await viewer.goto(`${config.base}/#/terminals/${encodeURIComponent(id)}?read_only=1`);
    await viewer.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await waitTerminalLine(viewer, "console-ok");
    const viewerReadOnly = await viewer.locator("#terminal").getAttribute("data-read-only");
    await viewer.locator("#terminal .xterm").click();
    await viewer.keyboard.type("echo viewer-typed");
    await viewer.keyboard.press("Enter");
    // The writer types after the viewer did: once its line shows on both pages, the viewer's
    // keys, had they been sent, would have reached the terminal before it.
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("echo after-viewer");
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, "after-viewer");
    await waitTerminalLine(viewer, "after-viewer");
    await shot(viewer, "terminal-read-only");
    // A paste (the browser's paste event, as Ctrl+V sends it) reaches the program.
    await page.locator("#terminal .xterm-helper-textarea").evaluate((area) => {
      const data = new DataTransfer();
      data.setData("text/plain", "echo pasted-ok");
      area.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, "pasted-ok");
    // The terminal follows the window's size: the program sees xterm.js's rows and columns.
    await page.setViewportSize({ width: 640, height: 600 });
    await page.waitForFunction(() => window.etherTerminal && window.etherTerminal.cols < 80, null, { timeout: budget });
    const size = await page.evaluate(() => [window.etherTerminal.rows, window.etherTerminal.cols]);
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("stty size");
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, `${size[0]} ${size[1]}`);
    return {
      size,
      id,
      viewerReadOnly,
      viewerStatus: await viewer.locator("#terminal-status").textContent(),
      writerText: await terminalText(page),
      viewerText: await terminalText(viewer),
    };
  },

  // A terminal page whose connection drops: the page's Attach WebSocket is cut (playwright's
  // routeWebSocket stands between the page and the host), and while the page cannot reconnect a
  // second page writes config.lines numbered lines into the terminal. Once the first page can
  // connect again it resumes from the last offset it showed: every line once, in order.
  async reconnect(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    let offline = false;
    const connections = [];
    let refused = 0;
    await page.routeWebSocket(/\/rpc-ws\/ether\.v1\.TerminalService\/Attach$/, (socket) => {
      if (offline) {
        refused += 1;
        socket.close({ code: 4000, reason: "test: offline" });
        return;
      }
      connections.push({ socket, server: socket.connectToServer() });
    });
    const url = `${config.base}/#/terminals/${encodeURIComponent(config.id)}`;
    await page.goto(url);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("echo before-$((2+2))");
    await page.keyboard.press("Enter");
    await waitTerminalLine(page, "before-4");
    // Cut the connection; the page's retries are refused until the lines are written.
    offline = true;
    const { socket, server } = connections.at(-1);
    await server.close();
    await socket.close({ code: 4000, reason: "test: dropped" });
    await page.locator("#terminal-status").filter({ hasText: "Connection lost" }).waitFor({ timeout: budget });
    const writer = await context.newPage();
    await writer.goto(url);
    await writer.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await writer.locator("#terminal .xterm").click();
    await writer.keyboard.type(`seq -f gap-%g 1 ${config.lines}; echo written-$((1+1))`);
    await writer.keyboard.press("Enter");
    await waitTerminalLine(writer, "written-2");
    const whileOffline = await terminalText(page);
    await shot(page, "terminal-offline");
    offline = false;
    await page.locator("#terminal-status").filter({ hasText: "resumed" }).waitFor({ timeout: budget });
    await waitTerminalLine(page, "written-2");
    await shot(page, "terminal-resumed");
    return {
      connections: connections.length,
      refused,
      status: await page.locator("#terminal-status").textContent(),
      offlineText: whileOffline,
      text: await terminalText(page),
    };
  },

  // A workflow from pasted YAML: a broken spec is refused with its line shown; the real one runs
  // with a progress bar per stage and its report rendered.
  async workflow(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/workflows`);
    await page.locator("#spec").waitFor({ timeout: budget });
    await page.fill("#spec", config.broken_spec);
    await page.click("#check-spec");
    await page.locator("#spec-error-lines").waitFor({ timeout: budget });
    const brokenMessage = await page.locator("#spec-error p").textContent();
    const markedLine = await page.locator("#spec-error-lines mark").textContent();
    await shot(page, "workflow-error");
    await page.fill("#spec", config.spec);
    await page.click("form[aria-label='New run'] button[value=start]");
    await page.waitForFunction(() => /^#\/workflows\/[^/]+$/.test(location.hash), null, { timeout: budget });
    await page.locator("#run-state[data-state=SUCCEEDED]").waitFor({ timeout: budget });
    await page.locator("#report h1").waitFor({ timeout: budget });
    const stages = await page.$$eval("[data-stage]", (sections) =>
      sections.map((section) => [section.dataset.stage, section.querySelector(".progress-label")?.dataset.percent]),
    );
    await shot(page, "workflow-run", false);
    return {
      brokenMessage,
      markedLine,
      stages,
      reportTitle: await page.locator("#report h1").textContent(),
      reportTables: await page.locator("#report table").count(),
      tasksShown: await page.locator("ol[aria-label='Completed tasks'] li").count(),
    };
  },

  // A run's page opened by its URL: the buttons it offers in config.before, a click on
  // config.click, then the state config.after with its report.
  async run_controls(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/workflows/${encodeURIComponent(config.run)}`);
    const buttons = async () => ({
      cancel: await page.locator("#cancel-run").isVisible(),
      resume: await page.locator("#resume-run").isVisible(),
    });
    await page.locator(`#run-state[data-state=${config.before}]`).waitFor({ timeout: budget });
    const before = await buttons();
    await shot(page, `run-${config.before.toLowerCase()}`, false);
    await page.click(config.click);
    await page.locator(`#run-state[data-state=${config.after}]`).waitFor({ timeout: budget });
    await page.locator("#report h1").waitFor({ timeout: budget });
    await shot(page, `run-${config.after.toLowerCase()}`, false);
    return {
      before,
      after: await buttons(),
      state: await page.locator("#run-state").textContent(),
      problem: await page.locator("main [role=alert]").first().textContent(),
      stages: await page.$$eval("[data-stage]", (sections) =>
        sections.map((section) => [section.dataset.stage, section.querySelector(".state")?.textContent, section.querySelector(".progress-label")?.dataset.percent]),
      ),
      report: await page.locator("#report").textContent(),
    };
  },

  // Pages opened by their URL in a fresh browser context (no history, nothing loaded before):
  // an agent, an action's form, a run, a terminal.
  async deeplinks(browser) {
    const open = async (hash) => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      await page.goto(`${config.base}/${hash}`);
      return page;
    };
    const agent = await open(`#/agents/${encodeURIComponent(config.agent)}`);
    await agent.locator(`section.card[aria-label="${config.action}"]`).waitFor({ timeout: budget });
    await shot(agent, "deep-agent", false);
    const form = await open(`#/run/${encodeURIComponent(config.agent)}/${encodeURIComponent(config.action)}`);
    await form.locator("form.schema").waitFor({ timeout: budget });
    const run = await open(`#/workflows/${encodeURIComponent(config.run)}`);
    await run.locator("#report h1").waitFor({ timeout: budget });
    await shot(run, "deep-run", false);
    const terminal = await open(`#/terminals/${encodeURIComponent(config.terminal)}`);
    await terminal.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await waitTerminalLine(terminal, config.line);
    await shot(terminal, "deep-terminal", false);
    const current = (page) => page.evaluate(() => document.querySelector("[aria-current=page]")?.textContent);
    return {
      agent: { title: await agent.locator("main > h1").textContent(), nav: await current(agent) },
      form: {
        title: await form.locator("main > h1").textContent(),
        fields: await form.$$eval("label.field[data-field]", (labels) => labels.map((label) => label.dataset.field)),
      },
      run: { title: await run.locator("main > h1").textContent(), state: await run.locator("#run-state").getAttribute("data-state"), nav: await current(run) },
      terminal: { title: await terminal.locator("main > h1").textContent(), nav: await current(terminal) },
    };
  },

  // Calls the host refuses, each from a page opened by its URL: what the page says.
  async errors(browser) {
    const said = {};
    for (const [name, hash, selector] of config.pages) {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`${config.base}/${hash}`);
      const shown = page.locator(selector).filter({ hasText: /\S/ }).first();
      await shown.waitFor({ timeout: budget });
      said[name] = await shown.textContent();
      await shot(page, `error-${name}`, false);
      await page.close();
    }
    return { said };
  },

  // By keyboard only: Tab from the top of the page into the navigation, Enter on a page's link.
  async keyboard(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/agents`);
    await page.locator("main p[role=status]").waitFor({ timeout: budget });
    const walked = [];
    for (;;) {
      await page.keyboard.press("Tab");
      const focused = await page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");
      walked.push(focused);
      if (focused === config.link) break;
      if (walked.length > 10) throw new Error(`Tab never reached ${config.link}: ${walked.join(" | ")}`);
    }
    const visibleFocus = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    await page.keyboard.press("Enter");
    await page.waitForFunction((hash) => location.hash === hash, config.hash, { timeout: budget });
    await page.locator("main h1").filter({ hasText: config.link }).waitFor({ timeout: budget });
    await shot(page, "keyboard", false);
    return {
      walked,
      visibleFocus,
      hash: await page.evaluate(() => location.hash),
      title: await page.locator("main h1").textContent(),
      current: await page.evaluate(() => document.querySelector("[aria-current=page]")?.textContent),
    };
  },

  // One turn with a gateway agent through Converse (the bridge), the context following live.
  async session(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/sessions`);
    await page.fill("#session-target", config.capability);
    await page.click("form[aria-label='Open a session'] button[type=submit]");
    await page.waitForFunction(() => /^#\/sessions\/[^/]+$/.test(location.hash), null, { timeout: budget });
    const id = decodeURIComponent((await page.evaluate(() => location.hash)).split("/")[2]);
    await page.locator("#message").fill(config.message);
    await page.locator("#message").press("Enter");
    await page.locator("#chat[data-turns]").waitFor({ timeout: budget });
    await page.waitForFunction((key) => (document.querySelector("#context")?.textContent ?? "").includes(key), config.context_key, { timeout: budget });
    await shot(page, "session", false);
    return {
      id,
      said: await page.$$eval("#chat li", (items) => items.map((li) => [li.querySelector(".chat-who")?.textContent, li.querySelector(".chat-text")?.textContent])),
      context: JSON.parse((await page.locator("#context").textContent()) ?? "{}"),
    };
  },

  // Egress decisions, live: the page is open (READY) when the test's agent makes a request.
  async audit(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/audit`);
    await page.locator("#audit-status[data-live=true]").waitFor({ timeout: budget });
    const before = await page.locator("tr[data-audit]").count();
    process.stdout.write("READY\n");
    await page.locator(`tr[data-audit]:has-text("${config.agent}")`).first().waitFor({ timeout: budget });
    await shot(page, "audit", false);
    return {
      before,
      rows: await page.$$eval("tr[data-audit]", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent))),
    };
  },

  // bench/console.py: a flood in a terminal (`read go; exec cat FILE`), timed from the Enter
  // that starts it to xterm.js having parsed every byte, with the page's worst timer lag then.
  async flood(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/terminals/${encodeURIComponent(config.terminal)}`);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await page.locator("#terminal .xterm").click();
    await page.evaluate(() => {
      window.benchLag = 0;
      let last = performance.now();
      window.benchTimer = setInterval(() => {
        const now = performance.now();
        window.benchLag = Math.max(window.benchLag, now - last - 50);
        last = now;
      }, 50);
      window.benchStart = performance.now();
      window.etherTerminalStats.bytes = 0;
    });
    await page.keyboard.press("Enter");
    await page.locator("#terminal-status").filter({ hasText: "The program ended" }).waitFor({ timeout: budget });
    const flood = await page.evaluate(
      () =>
        new Promise((resolve) =>
          window.etherTerminal.write("", () => {
            clearInterval(window.benchTimer);
            resolve({
              seconds: (performance.now() - window.benchStart) / 1000,
              receivedSeconds: (window.etherTerminalStats.lastAt - window.benchStart) / 1000,
              bytes: window.etherTerminalStats.bytes,
              lagMs: window.benchLag,
            });
          }),
        ),
    );
    // xterm.js alone, for comparison: as many bytes of text written from the page itself.
    const aloneCorpus = config.corpus ? await parseAlone(page, config.corpus) : null;
    const alone = await page.evaluate(
      (bytes) =>
        new Promise((resolve) => {
          const line = "def function(argument, other):  return argument + other  # Python text\r\n";
          const chunk = new TextEncoder().encode(line.repeat(Math.ceil((512 * 1024) / line.length)));
          const started = performance.now();
          for (let sent = 0; sent < bytes; sent += chunk.length) window.etherTerminal.write(chunk);
          window.etherTerminal.write("", () => resolve((performance.now() - started) / 1000));
        }),
      flood.bytes,
    );
    return { ...flood, aloneSeconds: alone, aloneCorpusSeconds: aloneCorpus };
  },

  // A flood (`read go; seq ...`, started with Enter) shown whole: every byte the page was given,
  // xterm.js's whole buffer once it has parsed them, its rows and scrollback.
  async flood_whole(browser) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${config.base}/#/terminals/${encodeURIComponent(config.terminal)}`);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await page.locator("#terminal .xterm").click();
    await page.keyboard.press("Enter");
    await page.locator("#terminal-status").filter({ hasText: "The program ended" }).waitFor({ timeout: budget });
    await page.evaluate(() => new Promise((resolve) => window.etherTerminal.write("", resolve)));
    return {
      bytes: await page.evaluate(() => window.etherTerminalStats.bytes),
      rows: await page.evaluate(() => window.etherTerminal.rows),
      scrollback: await page.evaluate(() => window.etherTerminal.options.scrollback),
      text: await terminalText(page),
    };
  },

  // The bridge takes WebSockets from the console's own origin only: a page served from another
  // origin (here the same host named localhost) cannot open one; the same page can on its own.
  async origin(browser) {
    const page = await browser.newPage();
    await page.goto(`${config.other_base}/`);
    const tryOpen = (url) =>
      page.evaluate(
        (target) =>
          new Promise((resolve) => {
            const socket = new WebSocket(target);
            socket.onopen = () => {
              socket.close();
              resolve("open");
            };
            socket.onerror = () => resolve("refused");
          }),
        url,
      );
    const path = "/rpc-ws/ether.v1.TerminalService/Attach";
    // A Connect call from that page: application/proto needs a CORS preflight, which the host
    // does not answer, so the browser never sends the call.
    const crossOriginCall = await page.evaluate(async (url) => {
      try {
        await fetch(url, { method: "POST", headers: { "content-type": "application/proto" }, body: new Uint8Array() });
        return "sent";
      } catch (error) {
        return `refused: ${error.name}`;
      }
    }, `${config.base}/rpc/ether.v1.SupervisorService/GetHostInfo`);
    return {
      crossOrigin: await tryOpen(`${config.base.replace("http", "ws")}${path}`),
      sameOrigin: await tryOpen(`${config.other_base.replace("http", "ws")}${path}`),
      crossOriginCall,
    };
  },

  // A caller without terminal.write: the host makes its attach read-only, and the page says so.
  async readonly_by_right(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript((token) => sessionStorage.setItem("ether.token", token), config.token);
    const page = await context.newPage();
    await page.goto(`${config.base}/#/terminals/${encodeURIComponent(config.terminal)}`);
    await page.locator("#terminal[data-attached=true]").waitFor({ timeout: budget });
    await waitTerminalLine(page, config.line);
    await page.locator("#terminal .xterm").click();
    await page.keyboard.type("echo typed-without-the-right");
    await page.keyboard.press("Enter");
    process.stdout.write("READY\n"); // the test writes the next line as its owner-admin
    await waitTerminalLine(page, config.after);
    return {
      readOnly: await page.locator("#terminal").getAttribute("data-read-only"),
      status: await page.locator("#terminal-status").textContent(),
    };
  },

  // The bridge without a token: the call ends with the host's status, as a gRPC call would.
  async bridge_refusal(browser) {
    const page = await browser.newPage();
    await page.goto(`${config.base}/`);
    const url = `${config.base.replace("http", "ws")}/rpc-ws/ether.v1.TerminalService/Attach`;
    const frames = await page.evaluate(
      (target) =>
        new Promise((resolve) => {
          const seen = [];
          const socket = new WebSocket(target);
          socket.onopen = () => socket.send(JSON.stringify({ metadata: {} }));
          socket.onmessage = (event) => seen.push(String(event.data));
          socket.onclose = (event) => resolve({ seen, code: event.code });
        }),
      url,
    );
    return frames;
  },

  // A host with tokens: the console asks for one, refuses a wrong one with the host's message,
  // and opens with a right one (kept for the tab only).
  async signin(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${config.base}/#/agents`);
    await page.waitForFunction(() => location.hash.startsWith("#/sign-in"), null, { timeout: budget });
    await page.locator("#token").waitFor({ timeout: budget });
    await shot(page, "sign-in");
    await page.fill("#token", config.wrong_token);
    await page.click("button[type=submit]");
    await page.waitForFunction(() => (document.querySelector("#sign-in-error")?.textContent ?? "").length > 0, null, { timeout: budget });
    const refusal = await page.locator("#sign-in-error").textContent();
    await page.fill("#token", config.token);
    await page.click("button[type=submit]");
    await page.waitForFunction(() => location.hash === "#/agents", null, { timeout: budget });
    await page.locator("p[role=status]").filter({ hasText: /agents|No agents/ }).waitFor({ timeout: budget });
    const status = await page.locator("main p[role=status]").textContent();
    const stored = await page.evaluate(() => ({ session: sessionStorage.getItem("ether.token"), local: localStorage.length }));
    const other = await context.newPage(); // a new tab: the token is not there
    await other.goto(`${config.base}/#/agents`);
    await other.waitForFunction(() => location.hash.startsWith("#/sign-in"), null, { timeout: budget });
    return { refusal, status, stored, otherTab: await other.evaluate(() => location.hash) };
  },
  // Every page opened by its URL in a fresh browser at each config.sizes ([width, height]):
  // what a person sees checked by layoutProblems (no sideways scrolling, the heading and the
  // page's main controls inside the window and not covered or cut off, no text out of its box).
  // config.pages: [{name, hash, ready (a selector the page shows once its data is in), controls}].
  async layout(browser) {
    const found = {};
    for (const [width, height] of config.sizes) {
      for (const { name, hash, ready, controls } of config.pages) {
        const context = await browser.newContext({ viewport: { width, height } });
        const page = await context.newPage();
        await page.goto(`${config.base}/${hash}`);
        await page.locator(ready).first().waitFor({ timeout: budget });
        await settled(page);
        found[`${name}@${width}`] = await layoutProblems(page, ["main h1", ...controls]);
        await page.evaluate(() => window.scrollTo(0, 0));
        await shot(page, `${name}-${width}`, false);
        await context.close();
      }
    }
    return { problems: found };
  },

  // The agents page stays still while agents change state: the page is open while the test
  // changes agents, one config.steps entry at a time ({agent: [state, replicas]} the page then
  // shows): READY, the test makes the change, the page shows it, READY again. Chromium's Layout
  // Instability API reports every shift from the first READY on.
  async shift_agents(browser) {
    const [width, height] = config.size;
    const page = await browser.newPage({ viewport: { width, height } });
    await page.goto(`${config.base}/#/agents`);
    for (const name of config.agents) {
      await page.locator(`tr[data-agent="${name}"] td.state`).filter({ hasText: "RUNNING" }).waitFor({ timeout: budget });
    }
    await settled(page);
    await watchShifts(page);
    for (const expect of config.steps) {
      process.stdout.write("READY\n");
      await page.waitForFunction(
        (expect) =>
          Object.entries(expect).every(([name, [state, replicas]]) => {
            const row = document.querySelector(`tr[data-agent="${name}"]`);
            return row?.querySelector("td.state")?.textContent === state && row.children[3]?.textContent === replicas;
          }),
        expect,
        { timeout: budget },
      );
    }
    await settled(page);
    await shot(page, `agents-after-${width}`, false);
    return {
      shifts: await shiftsSince(page),
      rows: await page.$$eval("tbody tr[data-agent]", (trs) => trs.map((tr) => tr.dataset.agent)),
    };
  },

  // A run's page stays still while its tasks complete: open (READY) while the run's first stage
  // waits for the test; then every stage runs, the page follows StreamRunEvents to the end and
  // renders the report; the shifts from READY on, as the Layout Instability API reports them.
  async shift_run(browser) {
    const [width, height] = config.size;
    const page = await browser.newPage({ viewport: { width, height } });
    await page.goto(`${config.base}/#/workflows/${encodeURIComponent(config.run)}`);
    await page.locator("#run-state[data-state=RUNNING]").waitFor({ timeout: budget });
    await settled(page);
    await watchShifts(page);
    process.stdout.write("READY\n");
    await page.locator("#run-state[data-state=SUCCEEDED]").waitFor({ timeout: budget });
    await page.locator("#report h1").waitFor({ timeout: budget });
    await settled(page);
    await shot(page, `run-after-${width}`, false);
    return {
      shifts: await shiftsSince(page),
      tasksShown: await page.locator("ol[aria-label='Completed tasks'] li").count(),
      stages: await page.$$eval("[data-stage]", (sections) =>
        sections.map((section) => [section.dataset.stage, section.querySelector(".progress-label")?.dataset.percent]),
      ),
    };
  },

  // Live pages across a host restart: the agents page (WatchEvents), an agent's page (StreamLogs)
  // and a run's page (StreamRunEvents) open in one browser. READY: the test stops the host; each
  // page says it is reconnecting; READY: the test starts the host again on the same address and
  // has the agent log config.line; each page catches up by itself (no reload: a mark left in
  // each page's window before the restart is still there).
  async live_restart(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const open = async (hash) => {
      const page = await context.newPage();
      await page.goto(`${config.base}/${hash}`);
      return page;
    };
    const agents = await open("#/agents");
    const agent = await open(`#/agents/${encodeURIComponent(config.agent)}`);
    const run = await open(`#/workflows/${encodeURIComponent(config.run)}`);
    await agents.locator(`tr[data-agent="${config.agent}"] td.state`).filter({ hasText: "RUNNING" }).waitFor({ timeout: budget });
    await agents.locator("main p[role=status][data-live=true]").waitFor({ timeout: budget });
    await agent.locator("#log-status[data-live=true]").waitFor({ timeout: budget });
    await run.locator("#run-state[data-state=RUNNING]").waitFor({ timeout: budget });
    await run.locator("#run-live[data-live=true]").waitFor({ timeout: budget });
    for (const page of [agents, agent, run]) await page.evaluate(() => (window.etherNotReloaded = true));
    process.stdout.write("READY\n"); // the test stops the host
    const lost = {
      agents: agents.locator("main p[role=status][data-live=false]"),
      agent: agent.locator("#log-status[data-live=false]"),
      run: run.locator("#run-live[data-live=false]"),
    };
    const said = {};
    for (const [name, locator] of Object.entries(lost)) {
      await locator.filter({ hasText: "reconnecting" }).waitFor({ timeout: budget });
      said[name] = await locator.textContent();
    }
    await shot(agents, "agents-reconnecting", false);
    await shot(run, "run-reconnecting", false);
    process.stdout.write("READY\n"); // the test starts the host again and has the agent log
    await agents.locator("main p[role=status][data-live=true]").waitFor({ timeout: budget });
    await agents.locator(`tr[data-agent="${config.agent}"] td.state`).filter({ hasText: "RUNNING" }).waitFor({ timeout: budget });
    await agent.locator("#log-status[data-live=true]").waitFor({ timeout: budget });
    await agent.waitForFunction((line) => (document.querySelector("pre.log")?.textContent ?? "").includes(line), config.line, { timeout: budget });
    await run.locator("#run-state[data-state=INTERRUPTED]").waitFor({ timeout: budget });
    await shot(agents, "agents-caught-up", false);
    await shot(agent, "agent-caught-up", false);
    await shot(run, "run-caught-up", false);
    const notReloaded = [];
    for (const page of [agents, agent, run]) notReloaded.push(await page.evaluate(() => window.etherNotReloaded === true));
    return {
      said,
      notReloaded,
      agentsStatus: await agents.locator("main p[role=status]").textContent(),
      logStatus: await agent.locator("#log-status").textContent(),
      log: await agent.locator("pre.log").textContent(),
      runState: await run.locator("#run-state").getAttribute("data-state"),
      resume: await run.locator("#resume-run").isVisible(),
      runLive: await run.locator("#run-live").textContent(),
    };
  },

  // The other live views across a host restart, in one browser: the terminal list
  // (WatchTerminals), a session's chat (Converse over the bridge) and context (WatchContext), the
  // audit (WatchAudit), a running action (ExecuteStream) and an agent's page (its header). READY:
  // the test stops the host; each view says it lost the connection; then every call of the
  // pages to the host is refused (held) while the test starts the host again and changes what
  // each view shows (READY, until DONE); let go, each view must catch up by itself, without a
  // reload. Each view's outcome is reported on its own (a view that never catches up fails its
  // wait, the others still report).
  async live_restart_views(browser) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    let held = false;
    await context.routeWebSocket(/\/rpc-ws\//, (socket) => {
      if (held) socket.close({ code: 4000, reason: "test: held" });
      else socket.connectToServer();
    });
    const open = async (hash) => {
      const page = await context.newPage();
      await page.goto(`${config.base}/${hash}`);
      return page;
    };
    const wait = (locator) => locator.waitFor({ timeout: budget });
    const terminalsPage = await open("#/terminals");
    const session = await open(`#/sessions/${encodeURIComponent(config.session)}`);
    const audit = await open("#/audit");
    const agent = await open(`#/agents/${encodeURIComponent(config.agent)}`);
    const action = await open(`#/run/${encodeURIComponent(config.agent)}/wait`);
    // Live, each showing what it should before the restart.
    await wait(terminalsPage.locator(`tr[data-terminal="${config.before_terminal}"]`));
    await wait(terminalsPage.locator("#terminals-status[data-live=true]"));
    await wait(session.locator("#chat-status[data-live=true]"));
    await wait(session.locator("#context-version[data-live=true]"));
    await session.locator("#message").fill("hello");
    await session.locator("#message").press("Enter");
    await wait(session.locator("#chat li .chat-text").filter({ hasText: "echo: hello" }));
    await session.locator("#message").fill("hold"); // held by the agent until the host stops
    await session.locator("#message").press("Enter");
    await wait(session.locator("#chat-status").filter({ hasText: "Thinking" }));
    await wait(audit.locator("#audit-status[data-live=true]"));
    await wait(audit.locator("tr[data-audit]"));
    await wait(agent.locator("#log-status[data-live=true]"));
    await wait(agent.locator("#agent-replicas").filter({ hasText: "1/1 replicas" }));
    await action.fill('[name="marker"]', config.marker);
    await action.click("button[type=submit]");
    await wait(action.locator(".progress-label").filter({ hasText: "Running (task" }));
    const taskLine = await action.locator(".progress-label").textContent();
    const pages = { terminals: terminalsPage, session, audit, agent, action };
    for (const page of Object.values(pages)) await page.evaluate(() => (window.etherNotReloaded = true));
    await stepDone(); // the test stopped the host
    const outcome = async (name, check) => {
      try {
        await check();
        return [name, true];
      } catch (error) {
        return [name, String(error?.message ?? error).split("\n")[0]];
      }
    };
    const lost = Object.fromEntries(
      await Promise.all([
        outcome("terminals", () => wait(terminalsPage.locator("#terminals-status[data-live=false]").filter({ hasText: "reconnecting" }))),
        outcome("chat", () => wait(session.locator("#chat-status[data-live=false]").filter({ hasText: "reconnecting" }))),
        outcome("context", () => wait(session.locator("#context-version[data-live=false]").filter({ hasText: "reconnecting" }))),
        outcome("audit", () => wait(audit.locator("#audit-status[data-live=false]").filter({ hasText: "reconnecting" }))),
        outcome("agent", () => wait(agent.locator("#log-status[data-live=false]"))),
        outcome("action", () => wait(action.locator(".progress-label[data-lost=true]"))),
      ]),
    );
    const lostAction = await action.locator(".progress-label").textContent();
    held = true;
    await context.route(/\/rpc\//, (route) => route.abort());
    await stepDone(); // the test started the host again and changed what each view shows
    await context.unroute(/\/rpc\//);
    held = false;
    const views = Object.fromEntries(
      await Promise.all([
        outcome("terminals", async () => {
          await wait(terminalsPage.locator("tr[data-terminal]").filter({ hasText: config.after_name }));
          await wait(terminalsPage.locator("#terminals-status[data-live=true]"));
        }),
        outcome("chat", async () => {
          await wait(session.locator("#chat li.chat-error").filter({ hasText: "host_restarted" }));
          await wait(session.locator("#chat li .chat-text").filter({ hasText: "echo: while-away" }));
          await wait(session.locator("#chat-status[data-live=true]").filter({ hasText: "Ready" }));
          await session.locator("#message").fill("after");
          await session.locator("#message").press("Enter");
          await wait(session.locator("#chat li .chat-text").filter({ hasText: "echo: after" }));
        }),
        outcome("context", async () => {
          await wait(session.locator("#context-version[data-live=true]"));
          await session.waitForFunction((key) => (document.querySelector("#context")?.textContent ?? "").includes(key), config.context_key, { timeout: budget });
        }),
        outcome("audit", async () => {
          await wait(audit.locator("#audit-status[data-live=true]"));
          await wait(audit.locator("tr[data-audit]").nth(1));
        }),
        outcome("agent", async () => {
          await wait(agent.locator("#log-status[data-live=true]"));
          await wait(agent.locator("#agent-replicas").filter({ hasText: "2/2 replicas" }));
          await wait(agent.locator("#agent-state").filter({ hasText: "RUNNING" }));
        }),
        outcome("action", async () => {
          await wait(action.locator(".progress-label[data-restarted=true]"));
        }),
      ]),
    );
    for (const [name, page] of Object.entries(pages)) await shot(page, `${name}-caught-up`, false);
    const notReloaded = {};
    for (const [name, page] of Object.entries(pages)) notReloaded[name] = await page.evaluate(() => window.etherNotReloaded === true);
    return {
      lost,
      views,
      notReloaded,
      taskLine,
      lostAction,
      terminals: await terminalsPage.$$eval("tr[data-terminal]", (trs) => trs.map((tr) => tr.dataset.terminal)),
      terminalsStatus: await terminalsPage.locator("#terminals-status").textContent(),
      chat: await session.$$eval("#chat li", (items) => items.map((li) => [li.querySelector(".chat-who")?.textContent, li.querySelector(".chat-text")?.textContent])),
      context: await session.locator("#context").textContent(),
      contextVersion: await session.locator("#context-version").textContent(),
      audit: await audit.$$eval("tr[data-audit]", (trs) => trs.map((tr) => tr.dataset.audit)),
      header: await agent.locator("#agent-replicas").textContent(),
      action: await action.locator(".progress-label").textContent(),
    };
  },

};

const browser = await chromium.launch({
  executablePath: config.chromium,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
// ETHER_CONSOLE_DIST=DIR: every page loads the console's assets (/console/main.js, style.css)
// from DIR instead of the host's web/dist. For checking that a test fails when a feature is
// broken, without touching web/dist, which other runs on this checkout share: copy web/ with the
// feature broken and build it (`node build.mjs`) into DIR.
if (process.env.ETHER_CONSOLE_DIST) {
  const dist = process.env.ETHER_CONSOLE_DIST;
  const types = { js: "text/javascript", css: "text/css" };
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const context = await newContext(options);
    await context.route(/\/console\/(main\.js|style\.css)$/, (route) => {
      const name = new URL(route.request().url()).pathname.split("/").at(-1);
      return route.fulfill({ path: `${dist}/${name}`, contentType: types[name.split(".").at(-1)] });
    });
    return context;
  };
  browser.newPage = async (options) => (await browser.newContext(options)).newPage();
}
try {
  const result = await scenarios[scenario](browser);
  process.stdout.write(JSON.stringify({ ok: true, screenshots: shots, ...result }) + "\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error), screenshots: shots }) + "\n");
  process.exitCode = 1;
} finally {
  await browser.close();
  input.close();
  process.stdin.destroy(); // the test keeps stdin open for its DONE lines
}

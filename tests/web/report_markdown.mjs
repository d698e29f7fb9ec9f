// Opens a finished run's page in Debian's Chromium (playwright-core, no browser download) for
// tests/web/test_console_doc_claims.py and prints one JSON line: what the rendered report's
// "Result" section holds. `node report_markdown.mjs '{"chromium", "base", "run", "budget_ms"}'`.
// A wait that runs out prints {"ok": false, "error"} (and exits 1) instead.
import { chromium } from "playwright-core";

const config = JSON.parse(process.argv[2]);
const budget = config.budget_ms ?? 60000;
const browser = await chromium.launch({
  executablePath: config.chromium,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const dialogs = [];
  page.on("dialog", async (dialog) => {
    dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  await page.goto(`${config.base}/#/workflows/${config.run}`);
  await page.locator("#report h1").waitFor({ timeout: budget });
  const shown = await page.evaluate(() => {
    const report = document.querySelector("#report");
    // The "Result" heading and what follows it: the Markdown the agent rendered. Text nodes
    // too: an escaped HTML block is text, not wrapped in an element.
    const heading = [...report.querySelectorAll("h2")].find((h) => h.textContent.trim() === "Result");
    const section = [];
    for (let node = heading?.nextSibling; node; node = node.nextSibling) section.push(node);
    const elements = section.filter((node) => node.nodeType === Node.ELEMENT_NODE);
    const within = (selector) => elements.flatMap((node) => [...(node.matches(selector) ? [node] : []), ...node.querySelectorAll(selector)]);
    return {
      hasResult: Boolean(heading),
      text: section.map((node) => node.textContent).join("\n"),
      // Elements the raw HTML would have made, anywhere in the report.
      raw: [...report.querySelectorAll("#raw-b, #raw-img, script, iframe, [onerror], [onclick]")].map((e) => e.outerHTML),
      links: within("a").map((a) => [a.textContent, a.getAttribute("href")]),
      images: within("img").map((img) => [img.getAttribute("alt"), img.getAttribute("src")]),
      pwned: window.__pwned ?? null,
    };
  });
  process.stdout.write(JSON.stringify({ ok: true, dialogs, ...shown }) + "\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + "\n");
  process.exitCode = 1;
} finally {
  await browser.close();
}

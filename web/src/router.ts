// Hash routes (#/agents, #/agents/NAME, #/run/AGENT/ACTION, #/terminals, #/terminals/ID,
// #/sign-in): every page deep-linkable, no server routes beyond /.

/** A page draws into ``main`` and stops its streams when ``signal`` aborts (navigation). */
export type Page = (main: HTMLElement, signal: AbortSignal, ...params: string[]) => void;

interface Route {
  pattern: RegExp;
  page: Page;
  nav: string;
}

const routes: Route[] = [];
let current: AbortController | null = null;

export function route(pattern: RegExp, nav: string, page: Page): void {
  routes.push({ pattern, page, nav });
}

export function go(hash: string): void {
  if (location.hash === hash) render();
  else location.hash = hash;
}

export function render(): void {
  const main = document.getElementById("main") as HTMLElement;
  const path = location.hash.replace(/^#/, "") || "/agents";
  current?.abort();
  current = new AbortController();
  for (const { pattern, page, nav } of routes) {
    const match = pattern.exec(path.split("?")[0] ?? "");
    if (!match) continue;
    for (const link of document.querySelectorAll<HTMLAnchorElement>("[data-nav]")) {
      if (link.dataset.nav === nav) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    page(main, current.signal, ...match.slice(1).map((part) => decodeURIComponent(part)));
    return;
  }
  main.replaceChildren(document.createTextNode(`No page at ${path}.`));
}

/** The query of the hash route (#/terminals/ID?read_only=1). */
export function hashQuery(): URLSearchParams {
  const [, query = ""] = location.hash.split("?");
  return new URLSearchParams(query);
}

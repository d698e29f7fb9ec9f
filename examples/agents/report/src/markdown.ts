// Small Markdown helpers: escaping and deterministic JSON.

/** Text safe in a table cell: pipes escaped, line breaks flattened. */
export function cell(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\|/g, "\\|").replace(/\r?\n/g, " ").trim();
}

/** Text safe in a heading: one line. */
export function headingText(text: string): string {
  return text.replace(/\s*\r?\n\s*/g, " ").trim();
}

/** Inline code that survives backticks in the text. */
export function code(text: string): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

/** A fenced block whose fence is longer than any backtick run inside. */
export function fenced(text: string, lang = ""): string {
  const longest = Math.max(0, ...[...text.matchAll(/`{3,}/g)].map((m) => m[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}${lang}\n${text}\n${fence}`;
}

/** JSON with object keys sorted, so the same value always renders the same. */
export function stableJson(value: unknown, indent = 2): string {
  return JSON.stringify(sortKeys(value), null, indent) ?? "null";
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value as object)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** Cuts text to `max` characters, saying how much was left out. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n… (${text.length - max} more characters)`;
}

/** A Markdown table. */
export function table(header: string[], rows: string[][], align: ("l" | "r")[] = []): string {
  const sep = header.map((_, i) => (align[i] === "r" ? "---:" : "---"));
  return [header, sep, ...rows].map((r) => `| ${r.join(" | ")} |`).join("\n");
}

/** A GitHub-style anchor for a heading. */
export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, "")
    .trim()
    .replace(/\s+/g, "-");
}

// The report's rendering, kept apart from the agent so it can be tested as plain functions.
// Everything is deterministic: same input, same Markdown, byte for byte.
import { cell, clip, code, fenced, headingText, stableJson, table } from "./markdown.js";

export interface Finding {
  title?: string;
  severity?: string;
  file?: string;
  detail?: string;
  data?: unknown;
}

export interface RenderParams {
  title?: string;
  findings: Finding[];
  summary?: string;
}

export interface Section {
  /** 1-based position in the report. */
  index: number;
  title: string;
  severity: string;
  file?: string;
}

export interface Rendered {
  markdown: string;
  sections: Section[];
  /** Findings per severity, in severity order. */
  counts: Record<string, number>;
}

/** Severities from worst to mildest; others sort after them, by name. */
export const SEVERITIES = ["critical", "high", "medium", "low", "info"] as const;
const DEFAULT_SEVERITY = "info";
const DATA_LIMIT = 4000;

export function normalizeSeverity(value: unknown): string {
  if (typeof value !== "string" || value.trim() === "") return DEFAULT_SEVERITY;
  const s = value.trim().toLowerCase();
  const aliases: Record<string, string> = { crit: "critical", error: "high", warning: "medium", warn: "medium", note: "info", notice: "info" };
  return aliases[s] ?? s;
}

function rank(severity: string): number {
  const i = (SEVERITIES as readonly string[]).indexOf(severity);
  return i === -1 ? SEVERITIES.length : i;
}

function compareSeverity(a: string, b: string): number {
  return rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** Renders findings: a summary table by severity, then one section per finding, worst first. */
export function renderFindings(params: RenderParams): Rendered {
  const title = headingText(params.title?.trim() || "Report");
  const findings = params.findings.map((f, i) => ({
    title: headingText(typeof f.title === "string" && f.title.trim() ? f.title : typeof f.file === "string" && f.file ? f.file : `Finding ${i + 1}`),
    severity: normalizeSeverity(f.severity),
    file: typeof f.file === "string" && f.file ? f.file : undefined,
    detail: typeof f.detail === "string" ? f.detail.trim() : undefined,
    data: f.data,
    order: i,
  }));
  findings.sort((a, b) => compareSeverity(a.severity, b.severity) || a.order - b.order);

  const counts: Record<string, number> = {};
  for (const f of findings) counts[f.severity] = (counts[f.severity] ?? 0) + 1;
  const severities = Object.keys(counts).sort(compareSeverity);

  const out: string[] = [`# ${title}`, ""];
  if (params.summary?.trim()) out.push(params.summary.trim(), "");
  out.push("## Summary", "");
  if (findings.length === 0) {
    out.push("No findings.", "");
  } else {
    const rows = severities.map((s) => [cell(s), String(counts[s])]);
    rows.push(["**total**", `**${findings.length}**`]);
    out.push(table(["Severity", "Findings"], rows, ["l", "r"]), "");
    out.push("## Findings", "");
  }
  const sections: Section[] = [];
  findings.forEach((f, i) => {
    const index = i + 1;
    out.push(`### ${index}. ${f.title}`, "");
    const facts = [`**Severity:** ${f.severity}`];
    if (f.file !== undefined) facts.push(`**File:** ${code(f.file)}`);
    out.push(facts.join(" · "), "");
    if (f.detail) out.push(f.detail, "");
    if (f.data !== undefined && f.data !== null) out.push(fenced(clip(stableJson(f.data), DATA_LIMIT), "json"), "");
    const section: Section = { index, title: f.title, severity: f.severity };
    if (f.file !== undefined) section.file = f.file;
    sections.push(section);
  });
  const ordered: Record<string, number> = {};
  for (const s of severities) ordered[s] = counts[s]!;
  return { markdown: `${out.join("\n").trimEnd()}\n`, sections, counts: ordered };
}

/** One task result, as the host's AgentOutput in JSON (proto or snake_case names) or simpler. */
export interface TaskResult {
  task_id?: string;
  taskId?: string;
  id?: string;
  name?: string;
  agent?: string;
  action?: string;
  status?: string | number;
  data?: unknown;
  result?: unknown;
  error?: { code?: string; message?: string } | string | null;
  metadata?: { duration?: string | number; duration_ms?: number; cost?: number; model?: string } | null;
}

export interface RenderWorkflowParams {
  title?: string;
  results: TaskResult[];
  summary?: string;
}

export interface WorkflowSection {
  index: number;
  task: string;
  status: "ok" | "error" | "partial" | "unknown";
}

export interface RenderedWorkflow {
  markdown: string;
  sections: WorkflowSection[];
  totals: { tasks: number; ok: number; error: number; partial: number; unknown: number; cost: number };
}

export function normalizeStatus(r: TaskResult): WorkflowSection["status"] {
  const s = String(r.status ?? "").toLowerCase().replace(/^task_status_/, "");
  if (s === "success" || s === "ok" || s === "1" || s === "succeeded" || s === "completed") return "ok";
  if (s === "error" || s === "failed" || s === "2") return "error";
  if (s === "partial" || s === "3") return "partial";
  if (s === "" || s === "unspecified") return r.error ? "error" : r.data !== undefined || r.result !== undefined ? "ok" : "unknown";
  return "unknown";
}

const STATUS_MARK: Record<WorkflowSection["status"], string> = { ok: "✅ ok", error: "❌ error", partial: "⚠️ partial", unknown: "❔ unknown" };

/** Duration in ms from "1.5s" (proto JSON), a number of seconds, or duration_ms. */
export function durationMs(meta: TaskResult["metadata"]): number | undefined {
  if (!meta) return undefined;
  if (typeof meta.duration_ms === "number") return meta.duration_ms;
  const d = meta.duration;
  if (typeof d === "number") return d * 1000;
  if (typeof d === "string" && /^-?\d+(\.\d+)?s$/.test(d)) return Number(d.slice(0, -1)) * 1000;
  return undefined;
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined) return "—";
  if (ms < 1) return "< 1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

function formatCost(cost: number): string {
  return cost === 0 ? "—" : `$${cost.toFixed(4)}`;
}

function errorOf(r: TaskResult): { code: string; message: string } | undefined {
  if (!r.error) return undefined;
  if (typeof r.error === "string") return { code: "error", message: r.error };
  if (!r.error.code && !r.error.message) return undefined;
  return { code: r.error.code || "error", message: r.error.message || "" };
}

/** Renders a workflow's task results: a summary table, then one section per task, in input order. */
export function renderWorkflow(params: RenderWorkflowParams): RenderedWorkflow {
  const title = headingText(params.title?.trim() || "Workflow report");
  const totals = { tasks: 0, ok: 0, error: 0, partial: 0, unknown: 0, cost: 0 };
  const rows: string[][] = [];
  const sections: WorkflowSection[] = [];
  const bodies: string[] = [];
  params.results.forEach((r, i) => {
    const index = i + 1;
    const status = normalizeStatus(r);
    const target = [r.agent, r.action].filter((x) => typeof x === "string" && x).join(".") || "—";
    const task = headingText(String(r.name || r.task_id || r.taskId || r.id || `task ${index}`));
    const cost = typeof r.metadata?.cost === "number" ? r.metadata.cost : 0;
    const ms = durationMs(r.metadata);
    totals.tasks++;
    totals[status]++;
    totals.cost += cost;
    rows.push([String(index), cell(task), cell(target), STATUS_MARK[status], formatDuration(ms), formatCost(cost)]);
    sections.push({ index, task, status });

    const body: string[] = [`### ${index}. ${task}`, ""];
    const facts = [`**Status:** ${STATUS_MARK[status]}`];
    if (target !== "—") facts.push(`**Agent:** ${code(target)}`);
    if (ms !== undefined) facts.push(`**Duration:** ${formatDuration(ms)}`);
    if (cost) facts.push(`**Cost:** ${formatCost(cost)}`);
    if (r.metadata?.model) facts.push(`**Model:** ${r.metadata.model}`);
    body.push(facts.join(" · "), "");
    const err = errorOf(r);
    if (err) body.push(`> **${err.code}**: ${err.message.replace(/\r?\n/g, "\n> ")}`, "");
    const data = r.data !== undefined ? r.data : r.result;
    if (data !== undefined && data !== null) {
      const embedded = typeof data === "object" && !Array.isArray(data) ? (data as Record<string, unknown>) : undefined;
      if (typeof embedded?.["summary"] === "string") body.push(embedded["summary"], "");
      if (typeof data === "string") body.push(clip(data, DATA_LIMIT), "");
      else body.push(fenced(clip(stableJson(data), DATA_LIMIT), "json"), "");
    }
    bodies.push(body.join("\n"));
  });
  totals.cost = Math.round(totals.cost * 1e6) / 1e6;

  const out: string[] = [`# ${title}`, ""];
  if (params.summary?.trim()) out.push(params.summary.trim(), "");
  const parts = [`${totals.tasks} task${totals.tasks === 1 ? "" : "s"}`, `${totals.ok} ok`];
  if (totals.partial) parts.push(`${totals.partial} partial`);
  parts.push(`${totals.error} failed`);
  if (totals.unknown) parts.push(`${totals.unknown} unknown`);
  if (totals.cost) parts.push(`cost ${formatCost(totals.cost)}`);
  out.push("## Summary", "", `${parts.join(", ")}.`, "");
  if (rows.length > 0) {
    out.push(table(["#", "Task", "Agent", "Status", "Duration", "Cost"], rows, ["r", "l", "l", "l", "r", "r"]), "");
    out.push("## Tasks", "", bodies.join("\n\n"), "");
  }
  return { markdown: `${out.join("\n").trimEnd()}\n`, sections, totals };
}

// How values read on the page.
import { AgentState, Language } from "./api.js";

export function stateName(state: AgentState): string {
  return AgentState[state]?.replace(/^AGENT_STATE_/, "") ?? String(state);
}

export function languageName(language: Language): string {
  return (Language[language]?.replace(/^LANGUAGE_/, "") ?? "").toLowerCase() || "-";
}

export function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? "null";
}

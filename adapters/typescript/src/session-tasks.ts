// Task bookkeeping for the session: what it keeps per task, which action a task frame runs,
// and the result frame a finished task gets.
import type { ActionSpec } from "./session.js";
import { AgentError } from "./errors.js";
import type { JsonValue, ResultFrame, ResultMetadata } from "./frames.js";
import { Output } from "./output.js";

/** A task the session has started and not yet answered. */
export interface TaskState {
  id: string;
  action: ActionSpec | undefined;
  frame: Record<string, unknown>;
  controller: AbortController;
  timer: NodeJS.Timeout | undefined;
  deadline: number | undefined;
  cancelled: boolean;
  done: boolean;
  metadata: ResultMetadata;
}

/** A result frame without its type and id: what a task's outcome becomes. */
export type ResultBody = Omit<ResultFrame, "type" | "id">;

/** The action a task frame runs, or undefined when the agent has no such action. */
export function resolveAction(
  actions: Map<string, ActionSpec>,
  frame: Record<string, unknown>,
): ActionSpec | undefined {
  const name = frame["action"];
  if (typeof name === "string" && name !== "") return actions.get(name);
  // The seeds' envelope names no action: run `run`, or the only action there is.
  if (actions.has("run")) return actions.get("run");
  if (actions.size === 1) return actions.values().next().value;
  return undefined;
}

/** The result of a handler that returned `value`. */
export function okBody(task: TaskState, value: unknown): ResultBody {
  if (task.cancelled) return errorBody(task, task.controller.signal.reason);
  if (Output.is(value)) {
    const body: ResultBody = {
      status: value.error === undefined ? "ok" : "partial",
      result: (value.result ?? null) as JsonValue,
    };
    if (value.error !== undefined) body.error = value.error;
    const metadata = { ...task.metadata, ...value.metadata };
    if (Object.keys(metadata).length > 0) body.metadata = metadata;
    if (value.nextActions.length > 0) body.next_actions = value.nextActions;
    return body;
  }
  const body: ResultBody = { status: "ok", result: (value ?? null) as JsonValue };
  if (Object.keys(task.metadata).length > 0) body.metadata = task.metadata;
  return body;
}

/** The result of a handler that threw (or rejected with) `err`. */
export function errorBody(task: TaskState, err: unknown): ResultBody {
  const signal = task.controller.signal;
  let error: AgentError;
  if (signal.aborted && (task.cancelled || !(err instanceof AgentError) || err === signal.reason)) {
    // Aborted: whatever the handler threw (AbortError, the reason itself), report why.
    error = AgentError.from(signal.reason);
  } else {
    error = AgentError.from(err);
  }
  const body: ResultBody = { status: "error", error: error.toBody() };
  if (Object.keys(task.metadata).length > 0) body.metadata = task.metadata;
  return body;
}

/**
 * The result frame for task `id` as one line. A body that is not JSON, or whose line is over
 * `maxFrame` bytes, becomes an error result so the task is still answered.
 */
export function resultLine(id: string, body: ResultBody, maxFrame: number): string {
  const frame: ResultFrame = { type: "result", id, ...body };
  let line: string;
  try {
    line = JSON.stringify(frame);
  } catch (err) {
    line = JSON.stringify({
      type: "result",
      id,
      status: "error",
      error: { code: "internal", message: `result is not JSON: ${(err as Error).message}` },
    } satisfies ResultFrame);
  }
  const size = Buffer.byteLength(line, "utf8");
  if (size > maxFrame) {
    line = JSON.stringify({
      type: "result",
      id,
      status: "error",
      error: {
        code: "frame_too_large",
        message: `result frame of ${size} bytes is over the max frame of ${maxFrame} bytes`,
        data: { size, max_frame: maxFrame },
      },
    } satisfies ResultFrame);
  }
  return line;
}

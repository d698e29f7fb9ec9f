// What a handler sees of its task: the Context built from the task frame, and the log frames
// its logger writes.
import type { CallOptions, Context, TaskLogger } from "./context.js";
import { isObject, toInt, type JsonObject, type JsonValue, type LogLevel, type OutboundFrame } from "./frames.js";
import type { ActionSpec } from "./session.js";
import type { PendingCalls } from "./session-calls.js";
import type { TaskState } from "./session-tasks.js";
import { taskTraceContext } from "./trace-context.js";

export const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warning: 30, error: 40 };

/** What a task's Context needs from the session. */
export interface ContextLink {
  /** The agent's config from welcome. */
  config: JsonObject;
  log: (level: LogLevel, msg: string, fields: Record<string, unknown> | undefined, taskId: string | undefined) => void;
  send: (frame: OutboundFrame) => void;
  calls: PendingCalls;
}

/** The Context `action`'s handler gets for `task`. */
export function taskContext(task: TaskState, action: ActionSpec, link: ContextLink): Context {
  const frame = task.frame;
  const trace = isObject(frame["trace"]) ? frame["trace"] : {};
  const publicId = typeof frame["task_id"] === "string" && frame["task_id"] ? frame["task_id"] : task.id;
  const log = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) =>
    link.log(level, msg, fields, task.id);
  const logger: TaskLogger = { debug: log("debug"), info: log("info"), warn: log("warning"), error: log("error") };
  const traceContext = taskTraceContext(frame);
  return {
    id: task.id,
    taskId: publicId,
    action: action.name,
    signal: task.controller.signal,
    deadline: task.deadline === undefined ? undefined : new Date(task.deadline),
    attempt: Math.max(1, toInt(frame["attempt"], 1)),
    trace: {
      rootId: typeof trace["root_id"] === "string" ? trace["root_id"] : publicId,
      parentId: typeof trace["parent_id"] === "string" ? trace["parent_id"] : "",
      depth: toInt(trace["depth"], 0),
    },
    traceParent: traceContext.parent,
    traceState: traceContext.state,
    sessionId: typeof frame["session_id"] === "string" && frame["session_id"] ? frame["session_id"] : undefined,
    budget: isObject(frame["budget"]) ? (frame["budget"] as JsonObject) : {},
    config: link.config,
    log: logger,
    progress: (done, total, message) => {
      if (task.done) return;
      const p: OutboundFrame = { type: "progress", id: task.id, progress: done };
      if (total !== undefined && total > 0) p.total = total;
      if (message !== undefined && message !== "") p.message = message;
      link.send(p);
    },
    cost: (value, model) => {
      task.metadata.cost = (task.metadata.cost ?? 0) + value;
      if (model !== undefined) task.metadata.model = model;
    },
    callAgent: <T = JsonValue>(agent: string, name: string, params: JsonObject = {}, options?: CallOptions) =>
      link.calls.call<T>(task, "agent.call", { agent, action: name, params }, options),
    hostCall: <T = JsonValue>(method: string, params: JsonObject = {}, options?: CallOptions) =>
      link.calls.call<T>(task, method, params, options),
  };
}

/** The `log` frame for one line; `logger` is the agent's name. */
export function logFrame(
  level: LogLevel,
  msg: string,
  logger: string,
  fields: Record<string, unknown> | undefined,
  taskId: string | undefined,
): OutboundFrame {
  const frame: OutboundFrame = { type: "log", level, msg: String(msg), logger };
  if (fields !== undefined && Object.keys(fields).length > 0) frame.fields = toJsonObject(fields);
  if (taskId !== undefined) frame.task_id = taskId;
  return frame;
}

export function normalizeLevel(level: string): LogLevel {
  const l = level.toLowerCase();
  if (l === "warn") return "warning";
  return l === "debug" || l === "info" || l === "warning" || l === "error" ? l : "info";
}

function toJsonObject(fields: Record<string, unknown>): JsonObject {
  try {
    return JSON.parse(JSON.stringify(fields)) as JsonObject;
  } catch {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(fields)) out[k] = String(v);
    return out;
  }
}

import type { JsonObject, JsonValue } from "./frames.js";

/** Where a task sits in the tree of tasks. */
export interface Trace {
  rootId: string;
  parentId: string;
  depth: number;
}

/** Structured logging for one task: each record is a `log` frame tied to the task. */
export interface TaskLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface CallOptions {
  /** Milliseconds to wait for the reply; default: the task's remaining deadline. */
  timeoutMs?: number;
  /** Aborts the call (the task's own signal always does). */
  signal?: AbortSignal;
  /**
   * W3C traceparent the call carries instead of the task's own: the host makes the call's span a
   * child of that span (say, one the agent opened with OpenTelemetry). Sent as given; empty or
   * absent means the task's own.
   */
  traceParent?: string;
  /** W3C tracestate sent with `traceParent` (ignored without it). */
  traceState?: string;
}

/** What an action receives besides its params. */
export interface Context {
  /** The host's id of this task on the link ("h-<n>"). */
  readonly id: string;
  /** The public task id clients see (falls back to `id`). */
  readonly taskId: string;
  /** The action being run. */
  readonly action: string;
  /** Aborted by a `cancel` frame, the deadline or shutdown; `signal.reason` is an AgentError. */
  readonly signal: AbortSignal;
  /** When the task must be done, if it has a deadline. */
  readonly deadline: Date | undefined;
  /** Attempt number, from 1. */
  readonly attempt: number;
  /** Position in the task tree. */
  readonly trace: Trace;
  /**
   * W3C traceparent of the host's span for this task; undefined when the task is not traced (or
   * the host sent a malformed one). Host calls carry it unless their options name another.
   */
  readonly traceParent: string | undefined;
  /** W3C tracestate that came with `traceParent`, if any. */
  readonly traceState: string | undefined;
  /** Gateway session the task runs for, if any. */
  readonly sessionId: string | undefined;
  /** Budget fields such as max_cost and max_iterations. */
  readonly budget: JsonObject;
  /** The agent's configuration from its deployment (welcome.config). */
  readonly config: JsonObject;
  /** Structured logs (log frames). */
  readonly log: TaskLogger;
  /** Reports progress: `done` should never decrease; `total` 0 or absent when unknown. */
  progress(done: number, total?: number, message?: string): void;
  /** Records the task's cost (added up over calls) and the model used. */
  cost(value: number, model?: string): void;
  /** Runs `action` on another agent through the host (`agent.call`); resolves to the reply's result. */
  callAgent<T = JsonValue>(agent: string, action: string, params?: JsonObject, options?: CallOptions): Promise<T>;
  /** Any host call declared in the agent's `calls` ("agent.call", "ctx.get", ...). */
  hostCall<T = JsonValue>(method: string, params?: JsonObject, options?: CallOptions): Promise<T>;
}

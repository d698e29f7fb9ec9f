// Frame shapes of the stdio link (proto/ether/adapter/v1/frames.proto), as proto3 JSON with
// the proto field names. Only the fields this adapter reads or writes are listed; unknown
// fields are ignored.

/** A JSON value as it travels in a frame. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/** The error body of a result or reply. */
export interface ErrorBody {
  code: string;
  message: string;
  data?: JsonObject;
  retryable?: boolean;
}

/** A follow-up an agent proposes in its result. */
export interface NextAction {
  agent: string;
  action: string;
  params?: JsonObject;
  reason?: string;
}

/** Cost, model and other facts about a finished task. */
export interface ResultMetadata {
  cost?: number;
  model?: string;
  extra?: JsonObject;
}

export interface ActionDescriptor {
  name: string;
  description: string;
  params_schema?: JsonObject;
  idempotent?: boolean;
  cache_ttl?: number;
}

export interface HelloFrame {
  type: "hello";
  protocol: number;
  agent: {
    name: string;
    version: string;
    language: "typescript";
    runtime: string;
    description?: string;
    kind?: string;
    tags?: string[];
  };
  actions: ActionDescriptor[];
  capabilities: {
    max_concurrency: number;
    cancel: boolean;
    progress: boolean;
    ping: boolean;
    calls: string[];
    max_frame: number;
  };
  pid: number;
}

export interface WelcomeFrame {
  type: "welcome";
  protocol?: number;
  host_version?: string;
  max_frame?: number | string;
  max_in_flight?: number;
  config?: JsonObject;
  log_level?: string;
  error?: ErrorBody;
  agent_name?: string;
}

export interface TraceFrame {
  root_id?: string;
  parent_id?: string;
  depth?: number;
}

/** A task; `payload` instead of `params` is the seeds' minimal envelope. */
export interface TaskFrame {
  type: "task";
  id: string;
  action?: string;
  params?: JsonValue;
  payload?: JsonValue;
  deadline_ms?: number | string;
  attempt?: number;
  trace?: TraceFrame;
  task_id?: string;
  session_id?: string;
  budget?: JsonObject;
  traceparent?: string;
  tracestate?: string;
}

export interface ResultFrame {
  type: "result";
  id: string;
  status: "ok" | "error" | "partial";
  result?: JsonValue;
  error?: ErrorBody;
  metadata?: ResultMetadata;
  next_actions?: NextAction[];
}

export interface ProgressFrame {
  type: "progress";
  id: string;
  progress: number;
  total?: number;
  message?: string;
}

export type LogLevel = "debug" | "info" | "warning" | "error";

export interface LogFrame {
  type: "log";
  level: LogLevel;
  msg: string;
  fields?: JsonObject;
  task_id?: string;
  logger?: string;
}

export interface CallFrame {
  type: "call";
  id: string;
  method: string;
  params: JsonObject;
  task_id: string;
  deadline_ms?: number;
  traceparent?: string;
  tracestate?: string;
}

export interface ReplyFrame {
  type: "reply";
  id: string;
  status: "ok" | "error";
  result?: JsonValue;
  error?: ErrorBody;
}

export interface CancelFrame {
  type: "cancel";
  id: string;
  reason?: string;
}

export interface PingFrame {
  type: "ping";
  id: string;
}

export interface PongFrame {
  type: "pong";
  id: string;
}

export interface ShutdownFrame {
  type: "shutdown";
  grace_ms?: number | string;
  reason?: string;
}

export interface FatalFrame {
  type: "fatal";
  code: string;
  message: string;
}

/** Frames the agent writes. */
export type OutboundFrame =
  | HelloFrame
  | ResultFrame
  | ProgressFrame
  | LogFrame
  | CallFrame
  | CancelFrame
  | PongFrame
  | FatalFrame;

/** The protocol versions this adapter speaks. */
export const SUPPORTED_PROTOCOLS: readonly number[] = [1];

/** The cookie the host sets in ETHER_HOST_COOKIE. */
export const HOST_COOKIE = "ether-agent-v1";

/** Default max frame in bytes (16 MiB). */
export const DEFAULT_MAX_FRAME = 16 * 1024 * 1024;

/** Exit code meaning "never restart me". */
export const EXIT_FATAL = 78;

/** Reads an int64 that proto3 JSON may carry as a string. */
export function toInt(value: unknown, fallback = 0): number {
  if (typeof value === "number" && Number.isFinite(value)) return Math.trunc(value);
  if (typeof value === "string" && value.trim() !== "") {
    const n = Number(value);
    if (Number.isFinite(n)) return Math.trunc(n);
  }
  return fallback;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

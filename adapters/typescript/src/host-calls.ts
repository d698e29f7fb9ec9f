// Typed helpers over Context.hostCall for the gateway (ctx.*, msg.*, net.fetch) and terminals
// (term.*). Method names and params mirror the Python SDK (ether_agent.gateway, .terminal).
// Declare the calls in `new Agent({ calls: [...CTX_CALLS, ...MSG_CALLS] })` and grant them in the
// deployment (`calls = ["ctx.*", "msg.*", "net.fetch", "term.*"]` in agent.toml).
import type { Agent } from "./agent.js";
import type { CallOptions, Context } from "./context.js";
import { AgentError } from "./errors.js";
import type { JsonObject, JsonValue } from "./frames.js";

export const CTX_CALLS = ["ctx.get", "ctx.put", "ctx.patch", "ctx.remove", "ctx.emit", "ctx.reply"] as const;
export const MSG_CALLS = ["msg.send", "msg.publish", "msg.receive", "msg.subscribe", "msg.unsubscribe"] as const;
export const NET_CALLS = ["net.fetch"] as const;
export const TERMINAL_CALLS = [
  "term.create",
  "term.list",
  "term.get",
  "term.write",
  "term.read",
  "term.wait",
  "term.resize",
  "term.signal",
  "term.close",
  "term.run",
] as const;
/** The action the host invokes once per mailbox message. */
export const HANDLER_ACTION = "on_message";
/** Code of a context write that named a stale version; nothing was changed. */
export const VERSION_CONFLICT = "version_conflict";

/** True when `error` is a context write's version conflict. */
export function isVersionConflict(error: unknown): boolean {
  return error instanceof AgentError && error.code === VERSION_CONFLICT;
}

type Params = Record<string, JsonValue | undefined>;

function clean(params: Params): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(params)) if (value !== undefined) out[key] = value;
  return out;
}

function call<T>(ctx: Context, method: string, params: Params, options?: CallOptions): Promise<T> {
  return ctx.hostCall<T>(method, clean(params), options);
}

// --- the session ------------------------------------------------------------------------------

export interface Snapshot {
  context: JsonObject;
  version: number;
}

export interface WriteOptions {
  /** Compare-and-set: fail with `version_conflict` unless the context is at this version. */
  expectedVersion?: number;
}

/** The session the task runs for: its context, custom events and reply chunks. */
export class Session {
  readonly id: string | undefined;
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    this.id = ctx.sessionId;
  }

  /** The context, or only `keys` of it, and its version. */
  async get(...keys: string[]): Promise<Snapshot> {
    const reply = await call<{ context?: JsonObject; version?: number }>(this.#ctx, "ctx.get", { keys });
    return { context: reply.context ?? {}, version: reply.version ?? 0 };
  }

  /** Sets one top-level key; resolves to the new version. */
  put(key: string, value: JsonValue, options: WriteOptions = {}): Promise<number> {
    return this.#write("ctx.put", { key, value }, options);
  }

  /** Sets several top-level keys at once; resolves to the new version. */
  update(values: JsonObject, options: WriteOptions = {}): Promise<number> {
    return this.#write("ctx.put", { values }, options);
  }

  /** Applies a JSON merge patch (RFC 7386: objects merge, null removes). */
  patch(patch: JsonObject, options: WriteOptions = {}): Promise<number> {
    return this.#write("ctx.patch", { patch }, options);
  }

  /** Removes top-level keys. */
  remove(keys: string[], options: WriteOptions = {}): Promise<number> {
    return this.#write("ctx.remove", { keys }, options);
  }

  /** Sends a custom event to the session's client; resolves to its sequence. */
  async emit(type: string, data: JsonValue = null): Promise<number> {
    const reply = await call<{ sequence?: number }>(this.#ctx, "ctx.emit", { type, data });
    return reply.sequence ?? 0;
  }

  /** Streams a piece of the reply now; the task's result is the final reply. */
  async replyChunk(text: string, data: JsonValue = null): Promise<number> {
    const reply = await call<{ sequence?: number }>(this.#ctx, "ctx.reply", { text, data });
    return reply.sequence ?? 0;
  }

  async #write(method: string, params: Params, options: WriteOptions): Promise<number> {
    const reply = await call<{ version?: number }>(this.#ctx, method, {
      ...params,
      expected_version: options.expectedVersion,
    });
    return reply.version ?? 0;
  }
}

/** The session of the task (the task must run for one: a turn, or a message about one). */
export function session(ctx: Context): Session {
  return new Session(ctx);
}

// --- messages ---------------------------------------------------------------------------------

/** A message from a mailbox or a topic; `sender` is who the host says sent it. */
export interface Message {
  id: string;
  sequence: number;
  sender: string;
  type: string;
  data: JsonValue;
  agent: string;
  topic: string;
  correlation_id: string;
  session_id: string;
  sent_at: number;
}

function message(raw: Partial<Message> | undefined): Message {
  return {
    id: raw?.id ?? "",
    sequence: raw?.sequence ?? 0,
    sender: raw?.sender ?? "",
    type: raw?.type ?? "",
    data: raw?.data ?? null,
    agent: raw?.agent ?? "",
    topic: raw?.topic ?? "",
    correlation_id: raw?.correlation_id ?? "",
    session_id: raw?.session_id ?? "",
    sent_at: raw?.sent_at ?? 0,
  };
}

export interface SendOptions {
  correlationId?: string;
  sessionId?: string;
  requestId?: string;
}

/** The calling agent's mailbox, other agents' mailboxes and topics. */
export class Messages {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
  }

  /** Puts a message in `agent`'s mailbox (`mailbox_full` when it is full). */
  async send(agent: string, type: string, data: JsonValue = null, options: SendOptions = {}): Promise<Message> {
    const reply = await call<{ message?: Partial<Message> }>(this.#ctx, "msg.send", {
      agent,
      type,
      data,
      correlation_id: options.correlationId ?? "",
      session_id: options.sessionId ?? "",
      request_id: options.requestId ?? "",
    });
    return message(reply.message);
  }

  /** Publishes on a topic; every current subscriber gets it. */
  async publish(
    topic: string,
    type: string,
    data: JsonValue = null,
    options: Omit<SendOptions, "requestId"> = {},
  ): Promise<Message> {
    const reply = await call<{ message?: Partial<Message> }>(this.#ctx, "msg.publish", {
      topic,
      type,
      data,
      correlation_id: options.correlationId ?? "",
      session_id: options.sessionId ?? "",
    });
    return message(reply.message);
  }

  /** Takes up to `maxMessages` from this agent's mailbox, waiting up to `waitMs` for the first. */
  async receive(maxMessages = 10, waitMs = 0): Promise<Message[]> {
    const reply = await call<{ messages?: Partial<Message>[] }>(this.#ctx, "msg.receive", {
      max: maxMessages,
      wait_ms: Math.floor(waitMs),
    });
    return (reply.messages ?? []).map(message);
  }

  /** Has the topic's messages copied into this agent's mailbox; resolves to its topics. */
  async subscribe(topic: string): Promise<string[]> {
    return (await call<{ topics?: string[] }>(this.#ctx, "msg.subscribe", { topic })).topics ?? [];
  }

  async unsubscribe(topic: string): Promise<string[]> {
    return (await call<{ topics?: string[] }>(this.#ctx, "msg.unsubscribe", { topic })).topics ?? [];
  }
}

export function messages(ctx: Context): Messages {
  return new Messages(ctx);
}

export type MessageHandler<R = unknown> = (message: Message, ctx: Context) => R | Promise<R>;

/**
 * Registers `handler` as the agent's `on_message` action: the host hands it the mailbox's
 * messages one at a time, in order, again if the agent died before answering (at least once).
 */
export function onMessage<R>(agent: Agent, handler: MessageHandler<R>): Agent {
  return agent.action<{ message?: Partial<Message> }, R>(
    HANDLER_ACTION,
    { description: "Receives mailbox messages (delivered by the host)." },
    (params, ctx) => handler(message(params.message), ctx),
  );
}

// --- egress -----------------------------------------------------------------------------------

export interface FetchOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  timeoutMs?: number;
  maxBytes?: number;
}

/** What `net.fetch` brought back (after redirects). */
export interface FetchResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  url: string;
  redirects: number;
  auditIds: number[];
  text(): string;
  json<T = JsonValue>(): T;
}

/**
 * Fetches `url` through the host's egress policy. A refusal rejects with an AgentError whose
 * code is the reason (`host_not_allowed`, `private_address`, `rate_limited`...).
 */
export async function fetch(ctx: Context, url: string, options: FetchOptions = {}): Promise<FetchResponse> {
  const params: Params = { url, method: options.method ?? "GET", headers: options.headers ?? {} };
  if (typeof options.body === "string") params["body"] = options.body;
  else if (options.body !== undefined) params["body_base64"] = Buffer.from(options.body).toString("base64");
  if (options.timeoutMs) params["timeout_ms"] = Math.floor(options.timeoutMs);
  if (options.maxBytes) params["max_bytes"] = options.maxBytes;
  const reply = await call<{
    status: number;
    headers?: Record<string, string>;
    url?: string;
    redirects?: number;
    audit_ids?: number[];
    text?: string;
    body_base64?: string;
  }>(ctx, "net.fetch", params);
  const body =
    reply.text !== undefined ? Buffer.from(reply.text, "utf8") : Buffer.from(reply.body_base64 ?? "", "base64");
  return {
    status: reply.status,
    headers: reply.headers ?? {},
    body,
    url: reply.url ?? url,
    redirects: reply.redirects ?? 0,
    auditIds: reply.audit_ids ?? [],
    text: () => body.toString("utf8"),
    json: <T>() => JSON.parse(body.toString("utf8")) as T,
  };
}
export * from "./terminal.js";

import type { Context } from "./context.js";
import type { JsonObject } from "./frames.js";
import { serveSpec, type ServeOptions } from "./serve.js";
import type { ActionSpec, AgentSpec } from "./session.js";

export interface AgentOptions {
  /** Agent name (the host's deployment name wins when they differ). Default: ETHER_AGENT_NAME. */
  name?: string;
  /** Version string. Default "0.0.0". */
  version?: string;
  /** What the agent does. */
  description?: string;
  /** "general" (default) or "io_gateway". */
  kind?: "general" | "io_gateway";
  /** Capability tags. */
  tags?: string[];
  /** Tasks run at once; the host queues the rest. Default 1. */
  maxConcurrency?: number;
  /** Host call methods the agent may use, such as "agent.call". */
  calls?: string[];
  /** Answer ping frames (declared in hello). Default true. */
  ping?: boolean;
  /** Largest frame in bytes the agent accepts. Default ETHER_MAX_FRAME or 16 MiB. */
  maxFrame?: number;
}

export interface ActionOptions {
  /** What the action does (sent in hello). */
  description?: string;
  /** JSON Schema of the params object; checked before the handler runs (`invalid_params`). */
  schema?: JsonObject;
  /** True when it is safe to run twice. */
  idempotent?: boolean;
  /** Seconds the host answers the same params from its result cache after a success; 0: never. */
  cacheTtl?: number;
}

/** An action: params in, a JSON value (or an Output) out. Throw AgentError to fail with a code. */
export type Handler<P = any, R = unknown> = (params: P, ctx: Context) => R | Promise<R>;

const BRAND = Symbol.for("ether.agent.Agent");

/**
 * An agent: a name, capabilities and actions.
 *
 *   const agent = new Agent({ name: "echo", maxConcurrency: 8, calls: ["agent.call"] });
 *   agent.action("echo", { description: "Returns its params" }, async (params) => params);
 *   export default agent;          // for `node dist/runtime.js --module ...`
 *   await agent.serve();           // or serve it directly: `node dist/agent.js`
 */
export class Agent {
  readonly [BRAND] = true;
  readonly options: Readonly<AgentOptions>;
  readonly #actions = new Map<string, ActionSpec>();

  constructor(options: AgentOptions = {}) {
    const max = options.maxConcurrency ?? 1;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxConcurrency must be a positive integer, got ${max}`);
    this.options = { ...options };
  }

  /** Adds an action; returns the agent for chaining. */
  action<P = any, R = unknown>(name: string, options: ActionOptions, handler: Handler<P, R>): this;
  action<P = any, R = unknown>(name: string, handler: Handler<P, R>): this;
  action<P = any, R = unknown>(name: string, a: ActionOptions | Handler<P, R>, b?: Handler<P, R>): this {
    const options = typeof a === "function" ? {} : a;
    const handler = typeof a === "function" ? a : b;
    if (typeof handler !== "function") throw new TypeError(`action ${name}: a handler function is required`);
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new TypeError(`action name ${JSON.stringify(name)} must match [A-Za-z0-9_.-]+`);
    if (this.#actions.has(name)) throw new TypeError(`action ${name} is defined twice`);
    this.#actions.set(name, {
      name,
      description: options.description ?? "",
      schema: options.schema,
      idempotent: options.idempotent ?? false,
      cacheTtl: cacheTtl(name, options.cacheTtl),
      handler: handler as ActionSpec["handler"],
    });
    return this;
  }

  /** Names of the actions, in the order they were added. */
  get actionNames(): string[] {
    return [...this.#actions.keys()];
  }

  /** What the session runs. */
  spec(env: Record<string, string | undefined> = process.env): AgentSpec {
    const o = this.options;
    return {
      name: o.name ?? env["ETHER_AGENT_NAME"] ?? "agent",
      version: o.version ?? "0.0.0",
      description: o.description ?? "",
      kind: o.kind ?? "general",
      tags: [...(o.tags ?? [])],
      maxConcurrency: o.maxConcurrency ?? 1,
      calls: [...(o.calls ?? [])],
      ping: o.ping ?? true,
      maxFrame: o.maxFrame ?? 0,
      actions: new Map(this.#actions),
    };
  }

  /**
   * Serves the agent on stdin/stdout until the host says shutdown, stdin closes or the host
   * dies; then sets `process.exitCode` (0, or 78 for "never restart me"). One agent per
   * process: calling it again returns the same promise.
   */
  serve(options: ServeOptions = {}): Promise<void> {
    return serveSpec(this, () => this.spec(), options);
  }

  /** True for an Agent from any copy of this package. */
  static is(value: unknown): value is Agent {
    return typeof value === "object" && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
  }
}

function cacheTtl(action: string, ttl: number | undefined): number {
  if (ttl === undefined) return 0;
  if (typeof ttl !== "number" || !Number.isFinite(ttl) || ttl < 0) {
    throw new TypeError(`action ${action}: cacheTtl must be a number of seconds >= 0, not ${String(ttl)}`);
  }
  return ttl;
}

import { AgentError } from "./errors.js";
import type { ErrorBody, JsonObject, NextAction, ResultMetadata } from "./frames.js";

export interface OutputInit {
  /** Makes the result `partial`: the value is usable, but this went wrong. */
  error?: AgentError | ErrorBody;
  /** Follow-ups the agent proposes. */
  nextActions?: NextAction[];
  /** Cost of the task (overrides `ctx.cost`). */
  cost?: number;
  /** Model used (overrides `ctx.cost`'s model). */
  model?: string;
  /** Other facts, such as token counts. */
  extra?: JsonObject;
}

const BRAND = Symbol.for("ether.agent.Output");

/**
 * What an action may return instead of a bare value, to add a partial error, proposed next
 * actions or metadata.
 *
 *   return new Output(summary, { nextActions: [{ agent: "report", action: "render", params }] });
 *   return Output.partial(rows, new AgentError("timeout", "3 of 10 files not read"));
 */
export class Output<T = unknown> {
  readonly [BRAND] = true;
  readonly result: T;
  readonly error: ErrorBody | undefined;
  readonly nextActions: NextAction[];
  readonly metadata: ResultMetadata;

  constructor(result: T, init: OutputInit = {}) {
    this.result = result;
    this.error = init.error instanceof AgentError ? init.error.toBody() : init.error;
    this.nextActions = init.nextActions ?? [];
    this.metadata = {};
    if (init.cost !== undefined) this.metadata.cost = init.cost;
    if (init.model !== undefined) this.metadata.model = init.model;
    if (init.extra !== undefined) this.metadata.extra = init.extra;
  }

  /** A partial result: `result` is usable, `error` says what is missing. */
  static partial<T>(result: T, error: AgentError | ErrorBody, init: Omit<OutputInit, "error"> = {}): Output<T> {
    return new Output(result, { ...init, error });
  }

  /** True for an Output from any copy of this package. */
  static is(value: unknown): value is Output {
    return typeof value === "object" && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
  }
}

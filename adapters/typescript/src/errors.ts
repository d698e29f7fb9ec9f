import type { ErrorBody, JsonObject } from "./frames.js";

/** Standard error codes of the stdio link (docs/protocol.md, rule 3). Agents may use their own. */
export type StandardCode =
  | "invalid_params"
  | "unknown_action"
  | "internal"
  | "cancelled"
  | "timeout"
  | "frame_too_large"
  | "shutting_down"
  | "permission_denied"
  | "cycle_detected"
  | "protocol_version_unsupported";

export interface AgentErrorOptions {
  /** Structured details, sent as the error's `data`. */
  details?: JsonObject;
  /** The underlying error. */
  cause?: unknown;
  /** True when running the same request again may succeed. */
  retryable?: boolean;
}

/**
 * The one error class of the adapter. Throw it from an action to fail the task with a code;
 * host calls that fail reject with it too (code from the host's reply).
 *
 *   throw new AgentError("invalid_params", "title is required", { details: { field: "title" } });
 */
export class AgentError extends Error {
  override readonly name = "AgentError";
  readonly code: StandardCode | (string & {});
  readonly details: JsonObject | undefined;
  readonly retryable: boolean;

  constructor(code: StandardCode | (string & {}), message: string, options: AgentErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
  }

  /** Wraps any thrown value: an AgentError is returned as is, anything else becomes `internal`. */
  static from(reason: unknown): AgentError {
    if (reason instanceof AgentError) return reason;
    if (isAgentErrorLike(reason)) {
      return new AgentError(reason.code, reason.message, {
        ...(reason.details === undefined ? {} : { details: reason.details }),
        retryable: reason.retryable ?? false,
        cause: reason,
      });
    }
    if (reason instanceof Error) {
      return new AgentError("internal", `${reason.name}: ${reason.message}`, {
        details: { traceback: reason.stack ?? String(reason) },
        cause: reason,
      });
    }
    return new AgentError("internal", `non-error thrown: ${describe(reason)}`, {
      details: { traceback: describe(reason) },
      cause: reason,
    });
  }

  /** Builds an AgentError from an error body of a reply or result. */
  static fromBody(body: ErrorBody | undefined): AgentError {
    if (body === undefined) return new AgentError("internal", "error without a body");
    return new AgentError(body.code || "internal", body.message ?? "", {
      ...(body.data === undefined ? {} : { details: body.data }),
      retryable: body.retryable ?? false,
    });
  }

  /** The error body written in a result frame. */
  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details !== undefined && Object.keys(this.details).length > 0) body.data = this.details;
    if (this.retryable) body.retryable = true;
    return body;
  }
}

/** Another copy of this package may be loaded (user module vs runtime): match by shape too. */
function isAgentErrorLike(
  value: unknown,
): value is { code: string; message: string; details?: JsonObject; retryable?: boolean } {
  return (
    value instanceof Error &&
    value.name === "AgentError" &&
    typeof (value as { code?: unknown }).code === "string"
  );
}

function describe(value: unknown): string {
  try {
    return typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

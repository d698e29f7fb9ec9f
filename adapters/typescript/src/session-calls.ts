// Calls from tasks to the host: each `call` frame gets an id, and the host's `reply` (or a
// timeout, an abort, the task's end) settles the promise the handler awaits.
import type { CallOptions } from "./context.js";
import { AgentError } from "./errors.js";
import { isObject, type ErrorBody, type JsonObject, type JsonValue, type OutboundFrame } from "./frames.js";
import type { TaskState } from "./session-tasks.js";
import { taskTraceContext } from "./trace-context.js";

interface PendingCall {
  taskId: string;
  resolve: (value: JsonValue) => void;
  reject: (reason: AgentError) => void;
  cleanup: () => void;
}

/** What the call table needs from the session. */
export interface CallLink {
  /** The host calls the agent declared (`new Agent({ calls })`). */
  declared: string[];
  /** The link's max frame now (it changes at welcome). */
  maxFrame: () => number;
  /** Sends a frame through the session's checks (used for `cancel`). */
  send: (frame: OutboundFrame) => void;
  /** Writes a line the caller has already checked. */
  writeLine: (line: string) => void;
  diag: (line: string) => void;
}

/** The host calls in flight, by call id. */
export class PendingCalls {
  readonly #link: CallLink;
  readonly #calls = new Map<string, PendingCall>();
  #callSeq = 0;

  constructor(link: CallLink) {
    this.#link = link;
  }

  /** Sends a `call` frame for `task`; resolves to the reply's result, rejects with its error. */
  call<T>(task: TaskState, method: string, params: JsonObject, options: CallOptions = {}): Promise<T> {
    if (task.done) return Promise.reject(new AgentError("cancelled", "the task has ended"));
    const declared = this.#link.declared;
    if (!declared.includes(method)) {
      return Promise.reject(
        new AgentError(
          "permission_denied",
          `host call ${JSON.stringify(method)} is not declared in new Agent({ calls }): [${declared.join(", ")}]`,
        ),
      );
    }
    const signals = [task.controller.signal, ...(options.signal ? [options.signal] : [])];
    const aborted = signals.find((s) => s.aborted);
    if (aborted) return Promise.reject(AgentError.from(aborted.reason));
    const id = `a-${++this.#callSeq}`;
    const frame: OutboundFrame = { type: "call", id, method, params, task_id: task.id };
    let waitMs = options.timeoutMs;
    if (waitMs === undefined && task.deadline !== undefined) waitMs = Math.max(1, task.deadline - Date.now());
    if (waitMs !== undefined) frame.deadline_ms = Math.max(1, Math.ceil(waitMs));
    // The host parents the call's span on it (docs/protocol.md): the caller's, else the task's.
    const trace =
      options.traceParent !== undefined && options.traceParent !== ""
        ? { parent: options.traceParent, state: options.traceState }
        : taskTraceContext(task.frame);
    if (trace.parent !== undefined) {
      frame.traceparent = trace.parent;
      if (trace.state !== undefined && trace.state !== "") frame.tracestate = trace.state;
    }
    const line = JSON.stringify(frame);
    const size = Buffer.byteLength(line, "utf8");
    const maxFrame = this.#link.maxFrame();
    if (size > maxFrame) {
      return Promise.reject(
        new AgentError("frame_too_large", `call frame of ${size} bytes is over the max frame of ${maxFrame} bytes`),
      );
    }
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (event: Event) => {
        const signal = event.target as AbortSignal;
        if (!this.#calls.has(id)) return;
        this.#link.send({ type: "cancel", id, reason: AgentError.from(signal.reason).message });
        this.settle(id, undefined, AgentError.from(signal.reason).toBody());
      };
      const cleanup = () => {
        if (timer !== undefined) clearTimeout(timer);
        for (const s of signals) s.removeEventListener("abort", onAbort);
      };
      for (const s of signals) s.addEventListener("abort", onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          if (!this.#calls.has(id)) return;
          this.#link.send({ type: "cancel", id, reason: "timeout" });
          this.settle(id, undefined, { code: "timeout", message: `no reply to ${method} in ${options.timeoutMs} ms` });
        }, options.timeoutMs);
      }
      this.#calls.set(id, {
        taskId: task.id,
        resolve: (value) => resolve(value as T),
        reject,
        cleanup,
      });
      this.#link.writeLine(line);
    });
  }

  /** Settles the call a `reply` frame answers. */
  onReply(frame: Record<string, unknown>): void {
    const id = String(frame["id"] ?? "");
    if (!this.#calls.has(id)) {
      this.#link.diag(`ether-agent: reply for unknown call ${id} dropped`);
      return;
    }
    if (frame["status"] === "ok") {
      this.settle(id, (frame["result"] ?? null) as JsonValue, undefined);
    } else {
      const error = isObject(frame["error"])
        ? (frame["error"] as unknown as ErrorBody)
        : { code: "internal", message: typeof frame["error"] === "string" ? frame["error"] : "call failed" };
      this.settle(id, undefined, error);
    }
  }

  /** Resolves call `id` with `value`, or rejects it with `error`; a settled or unknown id is ignored. */
  settle(id: string, value: JsonValue | undefined, error: ErrorBody | undefined): void {
    const call = this.#calls.get(id);
    if (call === undefined) return;
    this.#calls.delete(id);
    call.cleanup();
    if (error !== undefined) call.reject(AgentError.fromBody(error));
    else call.resolve(value ?? null);
  }

  /** Rejects the calls task `taskId` left open when it ended. */
  dropTask(taskId: string): void {
    // Calls the task left open are answered by the host as cancelled; stop waiting for them.
    for (const [id, call] of this.#calls) {
      if (call.taskId === taskId) {
        this.#calls.delete(id);
        call.cleanup();
        call.reject(new AgentError("cancelled", "the task ended before the call's reply"));
      }
    }
  }

  /** Rejects every call in flight with `error`. */
  rejectAll(error: ErrorBody): void {
    for (const id of [...this.#calls.keys()]) this.settle(id, undefined, error);
  }
}

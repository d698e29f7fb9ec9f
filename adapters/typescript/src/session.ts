// One run of the stdio link (docs/protocol.md): handshake, task dispatch, host calls, shutdown.
// Process concerns (fds, signals, host death) live in serve.ts; this file only sees a byte
// stream in, a frame sink out and an environment, so it can be tested in one process.
// Its parts sit beside it: session-handshake.ts (hello), session-tasks.ts (task state, results),
// session-context.ts (a handler's Context, log frames), session-calls.ts (host calls in flight).
import type { Context } from "./context.js";
import { AgentError } from "./errors.js";
import {
  DEFAULT_MAX_FRAME,
  EXIT_FATAL,
  HOST_COOKIE,
  SUPPORTED_PROTOCOLS,
  isObject,
  toInt,
  type JsonObject,
  type LogLevel,
  type OutboundFrame,
} from "./frames.js";
import { LineSplitter, decodeLine, recoverHead } from "./line-reader.js";
import { validate } from "./schema.js";
import { PendingCalls } from "./session-calls.js";
import { LEVELS, logFrame, normalizeLevel, taskContext } from "./session-context.js";
import { chooseProtocol, helloFrame } from "./session-handshake.js";
import { errorBody, okBody, resolveAction, resultLine, type ResultBody, type TaskState } from "./session-tasks.js";

/** An action as the session runs it. */
export interface ActionSpec {
  name: string;
  description: string;
  schema: JsonObject | undefined;
  idempotent: boolean;
  cacheTtl: number;
  handler: (params: any, ctx: Context) => unknown;
}

/** Everything the session needs to know about the agent. */
export interface AgentSpec {
  name: string;
  version: string;
  description: string;
  kind: string;
  tags: string[];
  maxConcurrency: number;
  calls: string[];
  ping: boolean;
  /** Largest frame the agent accepts; 0 = ETHER_MAX_FRAME or 16 MiB. */
  maxFrame: number;
  actions: Map<string, ActionSpec>;
}

/** Where frames go: one writer, whole lines. */
export interface FrameSink {
  writeLine(line: string): void;
  flush(): Promise<void>;
  readonly closed: boolean;
}

export interface SessionIO {
  input: AsyncIterable<Buffer | string> & { destroy?: () => void };
  sink: FrameSink;
  env: Record<string, string | undefined>;
  /** Free-form diagnostics (stderr). */
  diag?: (line: string) => void;
  pid?: number;
  /** Grace after stdin EOF without a shutdown frame. */
  eofGraceMs?: number;
  /** How long aborted handlers get to settle before their results are written for them. */
  abortWaitMs?: number;
}

type State = "handshake" | "running" | "draining" | "done";

/** Grace after stdin EOF without a shutdown frame (the same in every adapter). */
export const EOF_GRACE_MS = 3000;
/** Grace after SIGTERM: the host sends it when a shutdown's grace is over. */
export const SIGTERM_GRACE_MS = 1000;
/** How long aborted handlers get to settle before their results are written for them. */
export const ABORT_WAIT_MS = 1000;
/** How long the last frames may take to be written at exit. */
export const FLUSH_TIMEOUT_MS = 10_000;

export class Session {
  readonly #spec: AgentSpec;
  readonly #io: SessionIO;
  readonly #diag: (line: string) => void;
  readonly #splitter: LineSplitter;
  readonly #agentMaxFrame: number;
  #maxFrame: number;
  #state: State = "handshake";
  #config: JsonObject = {};
  #logLevel = LEVELS.info;
  #agentName: string;
  #tasks = new Map<string, TaskState>();
  #queue: Record<string, unknown>[] = [];
  readonly #calls: PendingCalls;
  #graceTimer: NodeJS.Timeout | undefined;
  #shutdownAt: number | undefined;
  #abortTimer: NodeJS.Timeout | undefined;
  #exitCode = 0;
  #finished: Promise<number>;
  #resolveFinished!: (code: number) => void;
  /** Lines skipped because they were not frames. */
  noise = 0;

  constructor(spec: AgentSpec, io: SessionIO) {
    this.#spec = spec;
    this.#io = io;
    this.#diag = io.diag ?? ((line) => process.stderr.write(`${line}\n`));
    const envMax = toInt(io.env["ETHER_MAX_FRAME"], 0);
    this.#agentMaxFrame = spec.maxFrame > 0 ? spec.maxFrame : envMax > 0 ? envMax : DEFAULT_MAX_FRAME;
    this.#maxFrame = envMax > 0 ? Math.min(envMax, this.#agentMaxFrame) : this.#agentMaxFrame;
    this.#splitter = new LineSplitter(this.#maxFrame);
    this.#agentName = io.env["ETHER_AGENT_NAME"] || spec.name;
    this.#finished = new Promise((resolve) => (this.#resolveFinished = resolve));
    this.#calls = new PendingCalls({
      declared: spec.calls,
      maxFrame: () => this.#maxFrame,
      send: (frame) => this.#send(frame),
      writeLine: (line) => this.#io.sink.writeLine(line),
      diag: this.#diag,
    });
  }

  /** The link's max frame in bytes (after welcome: the smaller of the host's and the agent's). */
  get maxFrame(): number {
    return this.#maxFrame;
  }

  /** Runs the session to its end; resolves to the process exit code. */
  async run(): Promise<number> {
    const env = this.#io.env;
    if (env["ETHER_HOST_COOKIE"] !== HOST_COOKIE) {
      this.#diag(
        `This program is an Ether agent (${this.#spec.name}); it talks to the Ether host over stdin/stdout ` +
          "and is meant to be started by the host (for example `ether serve`), not by hand. " +
          "(ETHER_HOST_COOKIE is not set.)",
      );
      return EXIT_FATAL;
    }
    const chosen = chooseProtocol(env["ETHER_PROTOCOL_VERSIONS"]);
    if (chosen < 0) {
      const message =
        `the host offers protocol versions [${env["ETHER_PROTOCOL_VERSIONS"] ?? ""}], ` +
        `this adapter speaks [${SUPPORTED_PROTOCOLS.join(",")}]: upgrade one of them`;
      this.#diag(`ether-agent: ${message}`);
      this.#send({ type: "fatal", code: "protocol_version_unsupported", message });
      await this.#io.sink.flush();
      return EXIT_FATAL;
    }
    this.#send(helloFrame(this.#spec, chosen, this.#agentMaxFrame, this.#io.pid ?? process.pid));
    void this.#readLoop();
    return this.#finished;
  }

  /**
   * Stops taking tasks; in-flight ones get `graceMs` before their signals abort. A second call
   * may shorten the grace, never lengthen it.
   */
  shutdown(graceMs: number, reason = "shutdown"): void {
    if (this.#state === "done") return;
    if (this.#state === "handshake") {
      this.#finish(0);
      return;
    }
    const at = Date.now() + Math.max(0, graceMs);
    if (this.#state !== "draining") {
      this.#state = "draining";
      for (const frame of this.#queue.splice(0)) {
        this.#writeResult(String(frame["id"]), {
          status: "error",
          error: { code: "shutting_down", message: `agent is shutting down (${reason})`, retryable: true },
        });
      }
    } else if (this.#shutdownAt !== undefined && at >= this.#shutdownAt) {
      return;
    }
    if (this.#tasks.size === 0) {
      this.#finish(0);
      return;
    }
    if (this.#abortTimer !== undefined) return; // already aborting
    this.#shutdownAt = at;
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    this.#graceTimer = setTimeout(() => this.#abortAll(reason), Math.max(0, graceMs));
  }

  // --- handshake ------------------------------------------------------------------------------

  #onWelcome(frame: Record<string, unknown>): void {
    if (this.#state !== "handshake") {
      this.#diag("ether-agent: a second welcome was ignored");
      return;
    }
    const error = frame["error"];
    if (isObject(error) && (error["code"] || error["message"])) {
      this.#diag(`ether-agent: the host refused this agent: ${String(error["code"])}: ${String(error["message"] ?? "")}`);
      this.#finish(EXIT_FATAL);
      return;
    }
    const hostMax = toInt(frame["max_frame"], 0);
    if (hostMax > 0) this.#maxFrame = Math.min(hostMax, this.#agentMaxFrame);
    this.#splitter.maxFrame = this.#maxFrame;
    if (isObject(frame["config"])) this.#config = frame["config"] as JsonObject;
    const level = frame["log_level"];
    if (typeof level === "string") this.#logLevel = LEVELS[normalizeLevel(level)];
    if (typeof frame["agent_name"] === "string" && frame["agent_name"]) this.#agentName = frame["agent_name"];
    this.#state = "running";
  }

  // --- reading --------------------------------------------------------------------------------

  async #readLoop(): Promise<void> {
    try {
      for await (const chunk of this.#io.input) {
        const buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
        for (const event of this.#splitter.push(buf)) {
          if (event.kind === "line") this.#onLine(event.line);
          else this.#onOversized(event.head, event.size);
        }
        if (this.#state === "done") return;
      }
      for (const event of this.#splitter.end()) {
        if (event.kind === "line") this.#onLine(event.line);
        else this.#onOversized(event.head, event.size);
      }
    } catch (err) {
      if (this.#state === "done") return;
      this.#diag(`ether-agent: stdin failed: ${(err as Error).message}`);
    }
    this.#onEof();
  }

  #onEof(): void {
    if (this.#state === "done") return;
    if (this.#state === "draining") return; // shutdown already runs with its own grace
    this.shutdown(this.#io.eofGraceMs ?? EOF_GRACE_MS, "stdin closed");
  }

  #onLine(line: Buffer): void {
    if (line.length === 0) return;
    const decoded = decodeLine(line);
    if (!decoded.ok) {
      this.noise++;
      this.#diag(`ether-agent: skipped a line that is not a frame (${decoded.reason}): ${decoded.sample}`);
      return;
    }
    try {
      this.#onFrame(decoded.frame);
    } catch (err) {
      this.#diag(`ether-agent: frame handling failed: ${(err as Error).stack ?? String(err)}`);
    }
  }

  #onOversized(head: Buffer, size: number): void {
    this.noise++;
    const { id, type } = recoverHead(head);
    this.#diag(`ether-agent: skipped a ${size}-byte line over the max frame of ${this.#maxFrame} bytes (id ${id ?? "?"})`);
    if (type === "task" && id !== undefined && !this.#tasks.has(id)) {
      this.#writeResult(id, {
        status: "error",
        error: {
          code: "frame_too_large",
          message: `task frame of ${size} bytes is over the max frame of ${this.#maxFrame} bytes`,
          data: { size, max_frame: this.#maxFrame },
        },
      });
    } else if (type === "reply" && id !== undefined) {
      this.#calls.settle(id, undefined, {
        code: "frame_too_large",
        message: `reply of ${size} bytes is over the max frame of ${this.#maxFrame} bytes`,
      });
    }
  }

  #onFrame(frame: Record<string, unknown>): void {
    // A frame with a payload and no type is the seeds' task envelope.
    const type = frame["type"] ?? ("payload" in frame ? "task" : undefined);
    switch (type) {
      case "welcome":
        this.#onWelcome(frame);
        return;
      case "task":
        this.#onTask(frame);
        return;
      case "cancel":
        this.#onCancel(frame);
        return;
      case "reply":
        this.#calls.onReply(frame);
        return;
      case "ping":
        this.#send({ type: "pong", id: String(frame["id"] ?? "") });
        return;
      case "shutdown":
        this.shutdown(Math.max(0, toInt(frame["grace_ms"], 0)), String(frame["reason"] ?? "shutdown") || "shutdown");
        return;
      default:
        this.#diag(`ether-agent: dropped a frame of unknown type ${JSON.stringify(type)}`);
    }
  }

  // --- tasks ----------------------------------------------------------------------------------

  #onTask(frame: Record<string, unknown>): void {
    const id = frame["id"];
    if (typeof id !== "string" || id === "") {
      this.#diag("ether-agent: dropped a task without a string id");
      return;
    }
    if (this.#tasks.has(id) || this.#queue.some((f) => f["id"] === id)) {
      this.#diag(`ether-agent: dropped a task with the id ${id} already in flight`);
      return;
    }
    if (this.#state === "draining" || this.#state === "done") {
      this.#writeResult(id, {
        status: "error",
        error: { code: "shutting_down", message: "agent is shutting down", retryable: true },
      });
      return;
    }
    // A task before welcome (the seeds' envelope) runs too: the host has spoken.
    if (this.#state === "handshake") this.#state = "running";
    if (this.#tasks.size >= Math.max(1, this.#spec.maxConcurrency)) {
      this.#queue.push(frame);
      return;
    }
    this.#start(id, frame);
  }

  #start(id: string, frame: Record<string, unknown>): void {
    const action = resolveAction(this.#spec.actions, frame);
    const deadlineMs = toInt(frame["deadline_ms"], 0);
    const task: TaskState = {
      id,
      action,
      frame,
      controller: new AbortController(),
      timer: undefined,
      deadline: deadlineMs > 0 ? Date.now() + deadlineMs : undefined,
      cancelled: false,
      done: false,
      metadata: {},
    };
    this.#tasks.set(id, task);
    if (action === undefined) {
      const name = typeof frame["action"] === "string" ? frame["action"] : "";
      const actions = [...this.#spec.actions.keys()];
      this.#complete(task, {
        status: "error",
        error: {
          code: "unknown_action",
          message: `unknown action ${JSON.stringify(name)}; this agent has ${actions.join(", ") || "none"}`,
          data: { actions },
        },
      });
      return;
    }
    let params: unknown = "params" in frame ? frame["params"] : "payload" in frame ? frame["payload"] : {};
    if (params === null || params === undefined) params = {};
    const problems = validate(action.schema, params);
    if (problems.length > 0) {
      this.#complete(task, {
        status: "error",
        error: { code: "invalid_params", message: problems.join("; "), data: { problems } },
      });
      return;
    }
    if (task.deadline !== undefined) {
      task.timer = setTimeout(() => {
        task.controller.abort(new AgentError("timeout", `deadline of ${deadlineMs} ms exceeded`, { retryable: true }));
      }, deadlineMs);
    }
    const ctx = this.#context(task, action);
    let outcome: Promise<unknown>;
    try {
      outcome = Promise.resolve(action.handler(params, ctx));
    } catch (err) {
      outcome = Promise.reject(err);
    }
    outcome.then(
      (value) => this.#complete(task, okBody(task, value)),
      (err: unknown) => this.#complete(task, errorBody(task, err)),
    );
  }

  #complete(task: TaskState, body: ResultBody): void {
    if (task.done) return;
    task.done = true;
    if (task.timer !== undefined) clearTimeout(task.timer);
    this.#tasks.delete(task.id);
    this.#calls.dropTask(task.id);
    this.#writeResult(task.id, body);
    this.#afterTask();
  }

  #afterTask(): void {
    if (this.#state === "running") {
      while (this.#queue.length > 0 && this.#tasks.size < Math.max(1, this.#spec.maxConcurrency)) {
        const next = this.#queue.shift()!;
        this.#start(String(next["id"]), next);
      }
    }
    if (this.#state === "draining" && this.#tasks.size === 0) this.#finish(0);
  }

  #writeResult(id: string, body: ResultBody): void {
    this.#io.sink.writeLine(resultLine(id, body, this.#maxFrame));
  }

  #onCancel(frame: Record<string, unknown>): void {
    const id = String(frame["id"] ?? "");
    const reason = typeof frame["reason"] === "string" && frame["reason"] ? frame["reason"] : "cancelled by the host";
    const queued = this.#queue.findIndex((f) => f["id"] === id);
    if (queued !== -1) {
      this.#queue.splice(queued, 1);
      this.#writeResult(id, { status: "error", error: { code: "cancelled", message: reason } });
      this.#afterTask();
      return;
    }
    const task = this.#tasks.get(id);
    if (task === undefined) {
      this.#diag(`ether-agent: cancel for unknown task ${id} dropped`);
      return;
    }
    task.cancelled = true;
    if (!task.controller.signal.aborted) task.controller.abort(new AgentError("cancelled", reason));
  }

  #abortAll(reason: string): void {
    for (const task of this.#tasks.values()) {
      if (!task.controller.signal.aborted) {
        task.controller.abort(new AgentError("cancelled", `agent is shutting down (${reason})`, { retryable: true }));
      }
    }
    // Handlers that ignore their signal get a moment, then their results are written for them.
    this.#abortTimer = setTimeout(() => {
      for (const task of [...this.#tasks.values()]) {
        this.#complete(task, errorBody(task, task.controller.signal.reason));
      }
      this.#finish(0);
    }, this.#io.abortWaitMs ?? ABORT_WAIT_MS);
  }

  // --- context --------------------------------------------------------------------------------

  #context(task: TaskState, action: ActionSpec): Context {
    return taskContext(task, action, {
      config: this.#config,
      log: (level, msg, fields, taskId) => this.#log(level, msg, fields, taskId),
      send: (frame) => this.#send(frame),
      calls: this.#calls,
    });
  }

  // --- output ---------------------------------------------------------------------------------

  #log(level: LogLevel, msg: string, fields: Record<string, unknown> | undefined, taskId: string | undefined): void {
    if (LEVELS[level] < this.#logLevel) return;
    this.#send(logFrame(level, msg, this.#agentName, fields, taskId));
  }

  #send(frame: OutboundFrame): void {
    let line: string;
    try {
      line = JSON.stringify(frame);
    } catch (err) {
      this.#diag(`ether-agent: dropped a ${frame.type} frame that is not JSON: ${(err as Error).message}`);
      return;
    }
    if (Buffer.byteLength(line, "utf8") > this.#maxFrame) {
      this.#diag(`ether-agent: dropped a ${frame.type} frame over the max frame of ${this.#maxFrame} bytes`);
      return;
    }
    this.#io.sink.writeLine(line);
  }

  #finish(code: number): void {
    if (this.#state === "done") return;
    this.#state = "done";
    this.#exitCode = code;
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    if (this.#abortTimer !== undefined) clearTimeout(this.#abortTimer);
    for (const task of this.#tasks.values()) {
      if (task.timer !== undefined) clearTimeout(task.timer);
      if (!task.controller.signal.aborted) task.controller.abort(new AgentError("cancelled", "agent stopped"));
    }
    this.#calls.rejectAll({ code: "cancelled", message: "agent stopped" });
    this.#io.input.destroy?.();
    // Bounded: a host that stopped reading must not keep the agent alive forever.
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#diag(`ether-agent: frames still unwritten after ${FLUSH_TIMEOUT_MS} ms; exiting anyway`);
        resolve();
      }, FLUSH_TIMEOUT_MS);
    });
    void Promise.race([this.#io.sink.flush(), bound]).then(() => {
      clearTimeout(timer);
      this.#resolveFinished(this.#exitCode);
    });
  }
}

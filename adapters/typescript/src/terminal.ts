// Terminals for agents: the host's term.* calls (mirrors the Python SDK's ether_agent.terminal).
// Declare TERMINAL_CALLS in `new Agent({ calls })` and grant `calls = ["term.*"]` in agent.toml.
// Durations are seconds, as on the wire.
import type { Context } from "./context.js";
import { AgentError } from "./errors.js";
import type { JsonObject, JsonValue } from "./frames.js";

export interface ExitStatus {
  code: number | null;
  signal: number | null;
  signal_name: string | null;
}

/** What `term.run` saw: why it stopped, and the head and tail of the output as text. */
export interface RunResult {
  /** "exit", "pattern", "quiet" or "timeout". */
  reason: string;
  head: string;
  tail: string;
  totalChars: number;
  /** True when head and tail do not cover the whole output. */
  truncated: boolean;
  exitCode: number | null;
  signal: string;
  running: boolean;
  terminalId: string;
  match: string;
  groups: string[];
  /** The whole output when it fit, else head + a marker + tail. */
  output: string;
  raw: JsonObject;
}

function runResult(reply: JsonObject): RunResult {
  const status = (reply["exit_status"] ?? {}) as Partial<ExitStatus>;
  const head = String(reply["head"] ?? "");
  const tail = String(reply["tail"] ?? "");
  const totalChars = Number(reply["total_chars"] ?? 0);
  const truncated = Boolean(reply["truncated"]);
  const output = truncated
    ? `${head}\n[... ${totalChars - head.length - tail.length} characters ...]\n${tail}`
    : head + tail.slice(Math.max(0, head.length + tail.length - totalChars));
  return {
    reason: String(reply["reason"] ?? ""),
    head,
    tail,
    totalChars,
    truncated,
    exitCode: status.code ?? null,
    signal: status.signal_name ?? "",
    running: Boolean(reply["running"]),
    terminalId: String(reply["terminal_id"] ?? ""),
    match: String(reply["match"] ?? ""),
    groups: ((reply["groups"] ?? []) as JsonValue[]).map(String),
    output,
    raw: reply,
  };
}

function ms(seconds: number | undefined): number | undefined {
  return seconds === undefined ? undefined : Math.max(1, Math.floor(seconds * 1000));
}

function until(pattern: string | undefined, quiet: number | undefined): JsonObject {
  const out: JsonObject = {};
  if (pattern) out["pattern"] = pattern;
  if (quiet) out["quiet"] = quiet;
  return out;
}

function timeoutOption(seconds: number | undefined): { timeoutMs?: number } {
  const value = ms(seconds);
  return value === undefined ? {} : { timeoutMs: value };
}

export interface RunOptions {
  /** argv instead of a shell command line. */
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Stop when this regex appears in the output. */
  pattern?: string;
  /** Stop after this many seconds without output. */
  quiet?: number;
  /** Seconds at most (default 60). */
  timeout?: number;
  /** Characters kept for head and for tail (default 4000). */
  limit?: number;
  /** Keep the terminal after the program exited. */
  keep?: boolean;
}

/**
 * Runs a command in a new terminal until it exits, prints `pattern` or stays quiet for `quiet`
 * seconds, at most `timeout` seconds; returns the head and tail of its output.
 */
export async function runCommand(ctx: Context, command: string, options: RunOptions = {}): Promise<RunResult> {
  const timeout = options.timeout ?? 60;
  const params: JsonObject = {
    timeout,
    limit: options.limit ?? 4000,
    keep: options.keep ?? false,
    until: until(options.pattern, options.quiet),
  };
  if (options.argv !== undefined) params["argv"] = options.argv;
  else params["command"] = command;
  if (options.cwd) params["cwd"] = options.cwd;
  if (options.env) params["env"] = options.env;
  const reply = await ctx.hostCall<JsonObject>("term.run", params, timeoutOption(timeout + 30));
  return runResult(reply);
}

export interface OpenOptions {
  command?: string;
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  rows?: number;
  cols?: number;
  name?: string;
  term?: string;
  idleTimeout?: number;
}

/** Reply of `term.wait`: `matched` false on timeout or exit, with `reason`. */
export interface WaitResult extends JsonObject {
  matched: boolean;
  reason: string;
}

/** A terminal the agent owns; `close()` it when done (the host closes it when the agent stops). */
export class Terminal {
  readonly ctx: Context;
  info: JsonObject;

  constructor(ctx: Context, info: JsonObject) {
    this.ctx = ctx;
    this.info = info;
  }

  get id(): string {
    return String(this.info["terminal_id"]);
  }

  /** Starts `command` (a shell command line), `argv`, or the host's shell (`term.create`). */
  static async open(ctx: Context, options: OpenOptions = {}): Promise<Terminal> {
    const params: JsonObject = {
      rows: options.rows ?? 0,
      cols: options.cols ?? 0,
      name: options.name ?? "",
      term: options.term ?? "",
    };
    if (options.argv !== undefined) params["argv"] = options.argv;
    else if (options.command) params["command"] = options.command;
    if (options.cwd) params["cwd"] = options.cwd;
    if (options.env) params["env"] = options.env;
    if (options.idleTimeout) params["idle_timeout"] = options.idleTimeout;
    return new Terminal(ctx, await ctx.hostCall<JsonObject>("term.create", params));
  }

  #call<T = JsonObject>(method: string, params: JsonObject = {}, wait?: number): Promise<T> {
    return this.ctx.hostCall<T>(method, { ...params, terminal_id: this.id }, timeoutOption(wait));
  }

  /** Types `text` (use "\r" for Enter). */
  async write(text: string): Promise<void> {
    await this.#call("term.write", { text });
  }

  async writeBytes(data: Uint8Array): Promise<void> {
    await this.#call("term.write", { data_b64: Buffer.from(data).toString("base64") });
  }

  /** Presses a named key: Enter, Tab, Escape, Backspace, Up, Down, ..., F1..F12. */
  async key(name: string, options: { repeat?: number; alt?: boolean } = {}): Promise<void> {
    await this.#call("term.write", { key: name.toUpperCase(), repeat: options.repeat ?? 1, alt: options.alt ?? false });
  }

  /** Ctrl-<letter>: `ctrl("c")` interrupts, `ctrl("d")` ends input. */
  async ctrl(letter: string): Promise<void> {
    await this.#call("term.write", { ctrl: letter });
  }

  async paste(text: string): Promise<void> {
    await this.#call("term.write", { text, paste: true });
  }

  /** The screen: lines, cursor, title, alternate_screen, exit_status... (`term.read`). */
  screen(options: { scrollback?: boolean } = {}): Promise<JsonObject> {
    return this.#call("term.read", { scrollback: options.scrollback ?? false });
  }

  /** The visible lines joined with newlines. */
  async text(): Promise<string> {
    return ((await this.screen())["lines"] as string[]).join("\n");
  }

  #wait(seconds: number, condition: JsonObject): Promise<WaitResult> {
    return this.#call<WaitResult>("term.wait", { timeout: seconds, ...condition }, seconds + 30);
  }

  /** Waits until `regex` (multiline) matches the screen. */
  waitScreen(regex: string, options: { timeout?: number; scrollback?: boolean } = {}): Promise<WaitResult> {
    return this.#wait(options.timeout ?? 30, { screen: regex, scrollback: options.scrollback ?? false });
  }

  /** Waits until `regex` matches output from offset `after` on (default: from now on). */
  waitOutput(regex: string, options: { after?: number; timeout?: number; raw?: boolean } = {}): Promise<WaitResult> {
    const condition: JsonObject = { output: regex, raw: options.raw ?? false };
    if (options.after !== undefined) condition["after_offset"] = options.after;
    return this.#wait(options.timeout ?? 30, condition);
  }

  waitExit(options: { timeout?: number } = {}): Promise<WaitResult> {
    return this.#wait(options.timeout ?? 30, { exit: true });
  }

  /** Waits until the program prints nothing for `seconds`. */
  waitQuiet(seconds: number, options: { timeout?: number } = {}): Promise<WaitResult> {
    return this.#wait(options.timeout ?? 30, { quiet: seconds });
  }

  /** Types `text` and waits for `output` (a regex) in what the program prints next. */
  async typeAndWait(text: string, output: string, options: { timeout?: number } = {}): Promise<WaitResult> {
    const offset = Number((await this.#call("term.get"))["output_offset"]);
    await this.write(text);
    return this.waitOutput(output, { after: offset, timeout: options.timeout ?? 30 });
  }

  /** Types `command` and Enter into this terminal (a shell), then collects its output. */
  async run(command: string, options: { pattern?: string; quiet?: number; timeout?: number; limit?: number } = {}): Promise<RunResult> {
    const timeout = options.timeout ?? 60;
    const quiet = options.quiet ?? (options.pattern ? undefined : 1);
    const reply = await this.#call(
      "term.run",
      { command, timeout, limit: options.limit ?? 4000, until: until(options.pattern, quiet) },
      timeout + 30,
    );
    return runResult(reply);
  }

  resize(rows: number, cols: number): Promise<JsonObject> {
    return this.#call("term.resize", { rows, cols });
  }

  async signal(name: string, options: { foreground?: boolean } = {}): Promise<void> {
    await this.#call("term.signal", { signal: name, foreground: options.foreground ?? false });
  }

  /** Ends the program (SIGHUP, then SIGKILL after `grace` seconds) and removes the terminal. */
  close(options: { grace?: number } = {}): Promise<JsonObject> {
    return this.#call("term.close", options.grace === undefined ? {} : { grace: options.grace });
  }

  /** Closes, ignoring a terminal that is gone already (`not_found`). */
  async dispose(): Promise<void> {
    try {
      await this.close();
    } catch (error) {
      if (!(error instanceof AgentError && error.code === "not_found")) throw error;
    }
  }
}

/** Opens a terminal (see Terminal.open). */
export function terminal(ctx: Context, options: OpenOptions = {}): Promise<Terminal> {
  return Terminal.open(ctx, options);
}

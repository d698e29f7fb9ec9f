// Test helper: runs an agent process the way the host does and talks frames with it.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

export const RUNTIME = fileURLToPath(new URL("../runtime.js", import.meta.url));
export const FIXTURE = fileURLToPath(new URL("./fixture-agent.js", import.meta.url));
export const FIXTURE_FUNCTION = fileURLToPath(new URL("./fixture-function.js", import.meta.url));

export type Frame = Record<string, any>;

export class AgentProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly frames: Frame[] = [];
  readonly noise: string[] = [];
  stderr = "";
  #buf = "";
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(args: string[], env: Record<string, string> = {}) {
    this.child = spawn(process.execPath, args, {
      env: {
        PATH: process.env["PATH"] ?? "",
        ETHER_HOST_COOKIE: "ether-agent-v1",
        ETHER_PROTOCOL_VERSIONS: "1",
        ETHER_HOST_PPID: String(process.pid),
        ETHER_AGENT_NAME: "fixture",
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe"],
      // Its own process group, as the host spawns agents.
      detached: true,
    });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk: string) => this.#onData(chunk));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk: string) => (this.stderr += chunk));
    this.exited = once(this.child, "exit").then(([code, signal]) => ({ code, signal }));
  }

  static runtime(module = FIXTURE, env: Record<string, string> = {}): AgentProcess {
    return new AgentProcess([RUNTIME, "--module", module], env);
  }

  #onData(chunk: string): void {
    this.#buf += chunk;
    let nl: number;
    while ((nl = this.#buf.indexOf("\n")) !== -1) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      let frame: Frame;
      try {
        frame = JSON.parse(line) as Frame;
      } catch {
        this.noise.push(line);
        continue;
      }
      this.frames.push(frame);
      const i = this.#waiters.findIndex((w) => w.match(frame));
      if (i !== -1) this.#waiters.splice(i, 1)[0]!.resolve(frame);
    }
  }

  send(frame: Frame | string): void {
    this.child.stdin.write(typeof frame === "string" ? frame : `${JSON.stringify(frame)}\n`);
  }

  /** Resolves with the first frame (seen or future) that matches. */
  next(match: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame> {
    const seen = this.frames.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching frame in ${timeoutMs} ms; stderr:\n${this.stderr}`)), timeoutMs);
      this.#waiters.push({
        match,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
    });
  }

  result(id: string, timeoutMs?: number): Promise<Frame> {
    return this.next((f) => f["type"] === "result" && f["id"] === id, timeoutMs);
  }

  /** Waits for hello and answers welcome. */
  async handshake(welcome: Frame = {}): Promise<Frame> {
    const hello = await this.next((f) => f["type"] === "hello");
    this.send({ type: "welcome", protocol: 1, host_version: "test", max_frame: 16 * 1024 * 1024, max_in_flight: 4, config: {}, log_level: "info", ...welcome });
    return hello;
  }

  task(id: string, action: string, params: Frame = {}, extra: Frame = {}): void {
    this.send({ type: "task", id, action, params, deadline_ms: 0, attempt: 1, ...extra });
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

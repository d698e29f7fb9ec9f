// The process around a session: the frame channel, stdin, signals, host death and exit.
import { takeChannel } from "./channel.js";
import { FrameWriter } from "./frame-writer.js";
import { toInt } from "./frames.js";
import { killOwnGroup, watchHost } from "./host-watch.js";
import { EOF_GRACE_MS, SIGTERM_GRACE_MS, Session, type AgentSpec } from "./session.js";

export interface ServeOptions {
  /** Environment to read ETHER_* from. Default process.env. */
  env?: Record<string, string | undefined>;
  /** Grace in ms after stdin EOF without a shutdown frame. Default 3000. */
  eofGraceMs?: number;
  /** Milliseconds after the session ended before a process still held open by user handles exits. Default 1000. */
  exitAfterMs?: number;
}

const KEY = Symbol.for("ether.agent.serving");
type Global = typeof globalThis & { [KEY]?: { owner: unknown; done: Promise<void> } };

/** Runs one session on the process's stdio; one per process. */
export function serveSpec(owner: unknown, spec: () => AgentSpec, options: ServeOptions = {}): Promise<void> {
  const g = globalThis as Global;
  const current = g[KEY];
  if (current !== undefined) {
    if (current.owner === owner) return current.done;
    return Promise.reject(new Error("ether-agent: another agent is already served by this process"));
  }
  const done = run(spec(), options);
  g[KEY] = { owner, done };
  return done;
}

/** True once some agent serves in this process (the runtime uses it after loading a module). */
export function serving(): Promise<void> | undefined {
  return (globalThis as Global)[KEY]?.done;
}

async function run(spec: AgentSpec, options: ServeOptions): Promise<void> {
  const env = options.env ?? process.env;
  const diag = (line: string) => {
    process.stderr.write(`${line}\n`);
  };
  const channel = takeChannel();
  const writer = new FrameWriter(channel.fd, (err) => {
    diag(`ether-agent: the frame stream closed (${err.code ?? err.message}); frames are dropped from now on`);
  });
  const stdin = process.stdin;
  const session = new Session(spec, {
    input: stdin,
    sink: writer,
    env,
    diag,
    eofGraceMs: options.eofGraceMs ?? EOF_GRACE_MS,
  });
  const onTerm = () => session.shutdown(SIGTERM_GRACE_MS, "SIGTERM");
  const onInt = () => diag("ether-agent: SIGINT ignored (the host owns Ctrl-C; it sends shutdown)");
  process.on("SIGTERM", onTerm);
  process.on("SIGINT", onInt);
  const hostPid = toInt(env["ETHER_HOST_PPID"], 0);
  const watch = watchHost({
    hostPid: hostPid > 0 ? hostPid : undefined,
    onDeath: (why) => {
      diag(`ether-agent: the host is gone (${why}); killing the process group`);
      killOwnGroup(diag);
    },
  });
  let code: number;
  try {
    code = await session.run();
  } finally {
    watch.stop();
    process.off("SIGTERM", onTerm);
    process.off("SIGINT", onInt);
  }
  // The session flushed its frames already (bounded); whatever is left is lost with the reader.
  process.exitCode = code;
  stdin.destroy();
  // Every frame is written: exiting now loses nothing. Give the event loop a moment to drain on
  // its own; a user handle (a timer, a socket) must not keep a stopped agent alive.
  setTimeout(() => process.exit(code), options.exitAfterMs ?? 1000).unref();
}

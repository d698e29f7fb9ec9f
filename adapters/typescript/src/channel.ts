// Channel hygiene (docs/protocol.md rule 11): the frame stream is moved off fd 1 before user
// code loads, so console.log and child processes that inherit stdout land on stderr.
import { closeSync, fstatSync, openSync } from "node:fs";
import { Console } from "node:console";

export interface Channel {
  /** The fd frames are written to. */
  fd: number;
  /** True when fd 1 now points at stderr and `fd` is a private duplicate of the old stdout. */
  moved: boolean;
}

const KEY = Symbol.for("ether.agent.channel");
type Global = typeof globalThis & { [KEY]?: Channel };

/**
 * Takes the frame stream away from user code, once per process:
 *
 * 1. On Linux, when stdout and stderr are pipes or character devices, a private duplicate is opened
 *    through /proc/self/fd/1; fd 1 is closed and /proc/self/fd/2 reopened in its place, so
 *    fd 1 now is stderr for everything in the process and its children.
 * 2. In every case, console.log/info/debug/... and process.stdout.write go to stderr.
 */
export function takeChannel(): Channel {
  const g = globalThis as Global;
  const existing = g[KEY];
  if (existing !== undefined) return existing;
  const channel = moveStdout();
  redirectConsole(channel);
  g[KEY] = channel;
  return channel;
}

function moveStdout(): Channel {
  if (process.platform !== "linux") return { fd: 1, moved: false };
  let frames = -1;
  try {
    // Only pipes and character devices: a reopened regular file would get its own offset and
    // overwrite (or be overwritten by) whoever else writes to it; sockets cannot be reopened.
    const reopenable = (fd: number) => {
      const st = fstatSync(fd);
      return st.isFIFO() || st.isCharacterDevice();
    };
    if (!reopenable(1) || !reopenable(2)) return { fd: 1, moved: false };
    // "a" never truncates; the new open file description stays blocking even if Node later
    // makes fd 1 non-blocking.
    frames = openSync("/proc/self/fd/1", "a");
    // Check that stderr can be reopened before giving up fd 1.
    const probe = openSync("/proc/self/fd/2", "a");
    closeSync(probe);
    closeSync(1);
    const one = openSync("/proc/self/fd/2", "a");
    if (one !== 1) {
      // Another fd took slot 1 meanwhile: keep it closed rather than writing frames into it.
      closeSync(one);
      process.stderr.write("ether-agent: could not point fd 1 at stderr; using a JS-level redirect\n");
    }
    return { fd: frames, moved: one === 1 };
  } catch (err) {
    if (frames !== -1) {
      try {
        fstatSync(1);
        closeSync(frames);
        return { fd: 1, moved: false };
      } catch {
        // fd 1 is gone: keep the duplicate for frames.
        return { fd: frames, moved: false };
      }
    }
    process.stderr.write(`ether-agent: stdout stays on fd 1 (${(err as Error).message})\n`);
    return { fd: 1, moved: false };
  }
}

function redirectConsole(channel: Channel): void {
  const toStderr = new Console({ stdout: process.stderr, stderr: process.stderr });
  const target = console as unknown as Record<string, unknown>;
  const source = toStderr as unknown as Record<string, unknown>;
  for (const name of new Set([...Object.keys(target), ...Object.keys(source)])) {
    const method = source[name];
    if (typeof method === "function") target[name] = (method as (...args: unknown[]) => unknown).bind(toStderr);
  }
  if (!channel.moved) {
    // fd 1 still carries frames: user writes through process.stdout must not reach it.
    const stderrWrite = process.stderr.write.bind(process.stderr);
    Object.defineProperty(process.stdout, "write", { value: stderrWrite, writable: true, configurable: true });
  }
}

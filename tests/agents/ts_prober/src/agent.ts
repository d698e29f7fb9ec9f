// tsprober: tries, from inside its sandbox, what the sandbox must refuse, and runs into its
// resource limits. It answers as the Python prober and hog do (tests/agents/prober,
// tests/agents/hog), errors named by the Python exception the same failure raises there.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { createConnection } from "node:net";
import { hostname } from "node:os";
import { Agent, NET_CALLS, fetch } from "@ether/agent";

export const agent = new Agent({
  name: "tsprober",
  version: "1.0.0",
  description: "Probes its sandbox and runs into its limits.",
  calls: [...NET_CALLS],
});

// The Python exception the same errno raises, so the three probers answer alike.
const PYTHON_NAMES: Record<string, string> = {
  ECONNREFUSED: "ConnectionRefusedError",
  ENOENT: "FileNotFoundError",
  EACCES: "PermissionError",
  EPERM: "PermissionError",
  ETIMEDOUT: "TimeoutError",
};

type Outcome = { ok: boolean; error: string; [found: string]: unknown };

function outcome(error?: unknown, found: Record<string, unknown> = {}): Outcome {
  if (error === undefined) return { ok: true, error: "", ...found };
  const code = (error as NodeJS.ErrnoException).code ?? "";
  return { ok: false, error: PYTHON_NAMES[code] ?? "OSError", ...found };
}

agent.action<{ host: string; port: number }>(
  "connect",
  { description: "Open a TCP connection to host:port." },
  ({ host, port }) =>
    new Promise<Outcome>((resolve) => {
      const socket = createConnection({ host, port, timeout: 5000 });
      socket.once("connect", () => {
        socket.destroy();
        resolve(outcome());
      });
      socket.once("timeout", () => {
        socket.destroy();
        resolve(outcome(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })));
      });
      socket.once("error", (error) => resolve(outcome(error)));
    }),
);

agent.action<{ path: string }>("read", { description: "Read a file, or list a directory." }, ({ path }) => {
  try {
    if (isDirectory(path)) return outcome(undefined, { entries: readdirSync(path).sort() });
    return outcome(undefined, { size: readFileSync(path).length });
  } catch (error) {
    return outcome(error);
  }
});

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

agent.action<{ path: string }>("write", { description: "Create a file at path." }, ({ path }) => {
  try {
    writeFileSync(path, "written by the prober\n");
    return outcome();
  } catch (error) {
    return outcome(error);
  }
});

agent.action("look", { description: "The processes this agent can see, and its environment." }, () => {
  const processes: Record<string, string> = {};
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      processes[name] = readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    } catch {
      continue;
    }
  }
  const env: Record<string, string> = {};
  for (const key of ["HOME", "TMPDIR", "ETHER_SCRATCH"]) env[key] = process.env[key] ?? "";
  env["HOSTNAME"] = hostname();
  return { processes, env, cwd: process.cwd() };
});

agent.action<{ url: string }>("get", { description: "GET a URL through the host's net.fetch." }, async ({ url }, ctx) => {
  const response = await fetch(ctx, url);
  return { status: response.status, text: response.text() };
});

agent.action<{ mib: number }>(
  "allocate",
  { description: "Hold mib MiB of memory, every page written; return how much." },
  ({ mib }) => {
    // Buffers live outside V8's heap: the memory cgroup, not --max-old-space-size, stops them.
    const held = Array.from({ length: mib }, () => Buffer.alloc(1 << 20, 1));
    return { held_mib: held.length };
  },
);

agent.action<{ marker: string }>(
  "bomb",
  { description: "Start sleep children without end, each named marker; return." },
  async ({ marker }) => {
    await stat("/"); // start libuv's thread pool now: it aborts Node if it cannot start later
    const next = (): void => {
      const child = spawn("sleep", ["3600"], { argv0: marker, stdio: "ignore" });
      child.on("error", () => {}); // a refused fork (EAGAIN): go on
      child.unref();
      setImmediate(next);
    };
    next();
    return { started: true };
  },
);

agent.action("groups", { description: "This process's memory and process-count control groups." }, () => {
  const found: Record<string, string> = {};
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, names = "", ...path] = line.split(":");
    for (const name of names.split(",")) if (name) found[name] = path.join(":");
  }
  return { memory: found["memory"] ?? "", pids: found["pids"] ?? "" };
});

await agent.serve();

#!/usr/bin/env node
// The runtime: `node dist/runtime.js --module <compiled-user-module.js> [--export <name>]`.
// Takes fd 1 away from user code, loads the module and serves its agent: the named export,
// else the default export, else the only Agent the module exports. A function export is served
// as a one-action agent (`run`), the seeds' style.
import { takeChannel } from "./channel.js";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { Agent } from "./agent.js";
import { FrameWriter } from "./frame-writer.js";
import { EXIT_FATAL, HOST_COOKIE } from "./frames.js";
import { serveFunction } from "./serve-function.js";
import { serving } from "./serve.js";

const USAGE = "usage: node dist/runtime.js --module <path/to/agent.js> [--export <name>]";

async function main(): Promise<number | undefined> {
  const channel = takeChannel();
  let args;
  try {
    args = parseArgs({
      options: { module: { type: "string", short: "m" }, export: { type: "string", short: "e" }, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
    }).values;
  } catch (err) {
    return fail(channel.fd, "fatal_config", `${(err as Error).message}\n${USAGE}`);
  }
  if (args.help) {
    process.stderr.write(`${USAGE}\n`);
    return 0;
  }
  if (args.module === undefined) return fail(channel.fd, "fatal_config", `--module is required\n${USAGE}`);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(resolve(args.module)).href)) as Record<string, unknown>;
  } catch (err) {
    return fail(channel.fd, "fatal_config", `could not load ${args.module}: ${(err as Error).stack ?? String(err)}`);
  }
  const already = serving();
  if (already !== undefined) {
    // The module served its agent itself (top-level `agent.serve()`).
    await already;
    return undefined;
  }
  const name = args.export;
  let target: unknown;
  if (name !== undefined) {
    if (!(name in mod)) return fail(channel.fd, "fatal_config", `${args.module} has no export named ${name}`);
    target = mod[name];
  } else if (mod["default"] !== undefined) {
    target = mod["default"];
  } else {
    const agents = Object.values(mod).filter((v) => Agent.is(v));
    if (agents.length !== 1) {
      return fail(channel.fd, "fatal_config", `${args.module} exports ${agents.length} agents and no default; pass --export <name>`);
    }
    target = agents[0];
  }
  if (Agent.is(target)) {
    await target.serve();
  } else if (typeof target === "function") {
    await serveFunction(target as (params: unknown) => unknown);
  } else {
    return fail(channel.fd, "fatal_config", `${args.module}: the export is neither an Agent nor a function`);
  }
  return undefined;
}

/** A module that cannot load never will: a fatal frame when under a host, then exit 78. */
async function fail(fd: number, code: string, message: string): Promise<number> {
  process.stderr.write(`ether-agent: ${message}\n`);
  if (process.env["ETHER_HOST_COOKIE"] === HOST_COOKIE) {
    const writer = new FrameWriter(fd);
    writer.writeLine(JSON.stringify({ type: "fatal", code, message: message.split("\n")[0] ?? message }));
    await writer.flush();
  }
  return EXIT_FATAL;
}

main().then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`ether-agent: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);

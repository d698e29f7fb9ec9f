// The conformance agent in TypeScript: the same actions as the Python and Go ones
// (tests/conformance/README.md). Run as `node dist/agent.js` under the driver or the host.
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, AgentError, type JsonObject } from "@ether/agent";

// A banner through the normal console.log at import time: it must land on stderr, not in the frames.
console.log("conformance agent (typescript): loading");

const agent = new Agent({
  name: "conformance",
  version: "1.0.0",
  description: "Conformance agent for the stdio link (TypeScript adapter).",
  maxConcurrency: 128,
  maxFrame: 64 * 1024 * 1024,
  ping: true,
  calls: ["agent.call"],
});

agent.action("echo", { description: "Returns its params unchanged." }, (params: JsonObject) => params);

agent.action<{ ms: number }>(
  "sleep",
  { description: "Sleeps ms milliseconds; cancellable.", schema: { type: "object", properties: { ms: { type: "number", minimum: 0 } } } },
  async ({ ms = 0 }, ctx) => {
    await sleep(ms, undefined, { signal: ctx.signal });
    return { slept: ms };
  },
);

agent.action<{ steps: number }>("progress", { description: "Sends steps progress frames, then {steps}." }, ({ steps = 0 }, ctx) => {
  for (let i = 1; i <= steps; i++) ctx.progress(i, steps, `step ${i} of ${steps}`);
  return { steps };
});

agent.action<{ code: string; message: string }>("fail", { description: "Fails with the given code and message." }, ({ code, message }) => {
  throw new AgentError(code || "internal", message ?? "");
});

agent.action<{ bytes: number }>("big", { description: "Returns {data} of bytes 'x' characters." }, ({ bytes = 0 }) => ({
  data: "x".repeat(bytes),
}));

agent.action<{ text: string }>("print", { description: "console.log(text) from user code; the link must survive." }, ({ text = "" }) => {
  console.log(text);
  return { printed: true };
});

agent.action<{ agent: string; action: string; params?: JsonObject }>(
  "call",
  { description: "agent.call through the host; returns the reply's result." },
  ({ agent: target, action, params = {} }, ctx) => ctx.callAgent(target, action, params),
);

agent.action("spawn", { description: "Start a child process `sleep 300` without waiting; return {pid}." }, () => {
  const child = spawn("sleep", ["300"], { stdio: ["ignore", "inherit", "inherit"] });
  child.on("error", () => {});
  child.unref();
  return { pid: child.pid ?? -1 };
});

export default agent;

await agent.serve();

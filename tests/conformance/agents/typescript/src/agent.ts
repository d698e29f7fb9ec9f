// The conformance agent in TypeScript: the same actions as the Python and Go ones
// (tests/conformance/README.md). Run as `node dist/agent.js` under the driver or the host.
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, AgentError, type JsonObject } from "@ether/agent";

const agent = new Agent({
  name: "conformance",
  version: "1.0.0",
  description: "Conformance agent for the stdio link (TypeScript adapter).",
  maxConcurrency: 128,
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

export default agent;

await agent.serve();

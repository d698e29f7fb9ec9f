// A test agent for the adapter's own tests (the conformance agent lives in tests/conformance).
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, AgentError, Output } from "../index.js";

const agent = new Agent({ name: "fixture", version: "1.0", maxConcurrency: 4, calls: ["agent.call"], tags: ["test"] });

agent.action("echo", { description: "Returns its params" }, (params) => params);
agent.action("sleep", { schema: { type: "object", required: ["ms"], properties: { ms: { type: "integer", minimum: 0 } } } },
  async ({ ms }: { ms: number }, ctx) => {
    await sleep(ms, undefined, { signal: ctx.signal });
    return { slept: ms };
  });
agent.action("stubborn", async ({ ms }: { ms: number }) => {
  await sleep(ms);
  return { done: true };
});
agent.action("progress", async ({ steps }: { steps: number }, ctx) => {
  for (let i = 1; i <= steps; i++) ctx.progress(i, steps, `step ${i}`);
  ctx.log.info("done", { steps });
  ctx.cost(0.5, "none");
  return { steps };
});
agent.action("fail", ({ code, message }: { code: string; message: string }) => {
  throw new AgentError(code, message, { details: { why: "asked" }, retryable: true });
});
agent.action("crash", () => {
  throw new TypeError("boom");
});
agent.action("big", ({ bytes }: { bytes: number }) => ({ data: "x".repeat(bytes) }));
agent.action("print", ({ text }: { text: string }) => {
  console.log(text);
  process.stdout.write(`${text}\n`);
  return { printed: true };
});
agent.action("call", ({ agent: a, action, params }: { agent: string; action: string; params: Record<string, never> }, ctx) =>
  ctx.callAgent(a, action, params));
agent.action("partial", () =>
  Output.partial({ rows: 1 }, new AgentError("timeout", "1 of 2"), { nextActions: [{ agent: "report", action: "render" }] }));
agent.action("context", (_p, ctx) => ({
  id: ctx.id, taskId: ctx.taskId, attempt: ctx.attempt, trace: { ...ctx.trace }, config: ctx.config,
  deadline: ctx.deadline === undefined ? null : "set",
}));

export default agent;

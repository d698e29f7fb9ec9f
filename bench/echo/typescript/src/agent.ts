// The benchmark's TypeScript echo agent: one action, echo, that returns its params.
import { Agent, type JsonObject } from "@ether/agent";

// 128 > the 64 calls the benchmark keeps in flight, so nothing queues in the host.
const agent = new Agent({
  name: "echo-ts",
  version: "1.0.0",
  description: "Benchmark echo agent (TypeScript adapter).",
  maxConcurrency: 128,
});

// Safe to run twice: the host may retry it on another replica when a process dies (make chaos).
agent.action(
  "echo",
  { description: "Returns its params unchanged.", idempotent: true },
  (params: JsonObject) => params,
);

await agent.serve();

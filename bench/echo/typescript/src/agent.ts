// The benchmark's TypeScript echo agent: echo returns its params unchanged; hold returns them
// after params.ms milliseconds (bench/scale.py keeps thousands of tasks in flight with it).
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

agent.action(
  "hold",
  { description: "Returns its params after params.ms milliseconds.", idempotent: true },
  async (params: JsonObject) => {
    await new Promise((resolve) => setTimeout(resolve, Number(params.ms ?? 0)));
    return params;
  },
);

await agent.serve();

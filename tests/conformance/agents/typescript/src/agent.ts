// The conformance agent in TypeScript: the same actions as the Python and Go ones
// (tests/conformance/README.md). Run as `node dist/agent.js` under the driver or the host.
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import {
  Agent,
  AgentError,
  CTX_CALLS,
  type JsonObject,
  MSG_CALLS,
  NET_CALLS,
  TERMINAL_CALLS,
} from "@ether/agent";

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

// The params schema of `checked`: one property per case of tests/conformance/params_rule.json (the
// same JSON text in the Python and Go agents; vectors/params_rule.json checks the hello).
const CHECKED_SCHEMA: JsonObject = {"type": "object", "properties": {
  "type": {"type": "integer"},
  "required": {"type": "object", "required": ["id"]},
  "properties": {"type": "object", "properties": {"id": {"type": "string"}}},
  "items": {"type": "array", "items": {"type": "integer"}},
  "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
  "closed": {"type": "object", "properties": {"a": {}}, "additionalProperties": false},
  "enum": {"enum": ["red", "green", 1]},
  "const": {"const": {"a": 1, "b": [1, 2]}},
  "minimum": {"type": "number", "minimum": 0},
  "maximum": {"type": "number", "maximum": 10},
  "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 0},
  "exclusiveMaximum": {"type": "number", "exclusiveMaximum": 10},
  "multipleOf": {"type": "number", "multipleOf": 5},
  "minLength": {"type": "string", "minLength": 2},
  "maxLength": {"type": "string", "maxLength": 3},
  "pattern": {"type": "string", "pattern": "^[a-z]+$"},
  "minItems": {"type": "array", "minItems": 1},
  "maxItems": {"type": "array", "maxItems": 2},
  "uniqueItems": {"type": "array", "uniqueItems": true},
  "contains": {"type": "array", "contains": {"type": "string"}},
  "minProperties": {"type": "object", "minProperties": 1},
  "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
  "anyOf": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
  "oneOf": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
  "allOf": {"allOf": [{"minimum": 0}, {"maximum": 10}]},
  "not": {"not": {"type": "string"}}
}};

agent.action(
  "checked",
  { description: "Return the params unchanged (params_rule.json's keywords).", schema: CHECKED_SCHEMA },
  (params: JsonObject) => params,
);

agent.action("host_calls", { description: "Every host call the SDK knows (its call lists), sorted." }, () => {
  const known = new Set<string>(["agent.call", ...CTX_CALLS, ...MSG_CALLS, ...NET_CALLS, ...TERMINAL_CALLS]);
  return { calls: [...known].sort() };
});

export default agent;

await agent.serve();

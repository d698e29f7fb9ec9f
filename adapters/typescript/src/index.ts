// @ether/agent: write Ether agents in TypeScript. See README.md.
import { takeChannel } from "./channel.js";

// Started by something that speaks the host's env contract (even a host that forgot the cookie):
// take fd 1 away as soon as the SDK loads, before the rest of the user's modules run, so whatever
// they print lands on stderr (docs/protocol.md rule 11).
const CONTRACT = ["ETHER_HOST_COOKIE", "ETHER_HOST_PPID", "ETHER_PROTOCOL_VERSIONS", "ETHER_SPAWN_ID"];
if (CONTRACT.some((name) => process.env[name] !== undefined)) takeChannel();

export { Agent, type ActionOptions, type AgentOptions, type Handler } from "./agent.js";
export type { CallOptions, Context, TaskLogger, Trace } from "./context.js";
export { AgentError, type AgentErrorOptions, type StandardCode } from "./errors.js";
export type { ErrorBody, JsonObject, JsonValue, NextAction, ResultMetadata } from "./frames.js";
export { Output, type OutputInit } from "./output.js";
export type { ServeOptions } from "./serve.js";
export { functionAgent, serveFunction } from "./serve-function.js";
export * from "./host-calls.js";

// @ether/agent: write Ether agents in TypeScript. See README.md.
import { takeChannel } from "./channel.js";
import { HOST_COOKIE } from "./frames.js";

// Under a host, take fd 1 away as soon as the SDK loads, before the rest of the user's modules
// run: whatever they print lands on stderr (docs/protocol.md rule 11).
if (process.env["ETHER_HOST_COOKIE"] === HOST_COOKIE) takeChannel();

export { Agent, type ActionOptions, type AgentOptions, type Handler } from "./agent.js";
export type { CallOptions, Context, TaskLogger, Trace } from "./context.js";
export { AgentError, type AgentErrorOptions, type StandardCode } from "./errors.js";
export type { ErrorBody, JsonObject, JsonValue, NextAction, ResultMetadata } from "./frames.js";
export { Output, type OutputInit } from "./output.js";
export type { ServeOptions } from "./serve.js";
export { functionAgent, serveFunction } from "./serve-function.js";

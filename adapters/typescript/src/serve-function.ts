import { Agent, type AgentOptions, type Handler } from "./agent.js";
import type { ServeOptions } from "./serve.js";

/**
 * Serves a plain function as an agent with one action, `run` (the seeds' style): the
 * function gets the task's params (the envelope's payload) and returns the result.
 *
 *   export default async function (payload) { return { echoed: payload }; }
 *   // or: await serveFunction(async (payload) => ({ echoed: payload }));
 */
export function serveFunction<P = any, R = unknown>(
  fn: Handler<P, R>,
  options: AgentOptions & { description?: string } & ServeOptions = {},
): Promise<void> {
  return functionAgent(fn, options).serve(options);
}

/** The Agent serveFunction serves. */
export function functionAgent<P = any, R = unknown>(fn: Handler<P, R>, options: AgentOptions = {}): Agent {
  const agent = new Agent(options);
  agent.action("run", { description: options.description ?? "Runs the agent's function on the task's params." }, fn);
  return agent;
}

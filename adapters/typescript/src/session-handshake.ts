// The agent's side of the handshake: pick a protocol version from the host's offer, then
// describe the agent in its `hello` frame.
import { SUPPORTED_PROTOCOLS, type HelloFrame } from "./frames.js";
import type { AgentSpec } from "./session.js";

const RUNTIME = `node ${process.versions.node}`;

/** The highest version in ETHER_PROTOCOL_VERSIONS this adapter speaks; -1 when there is none. */
export function chooseProtocol(offeredVersions: string | undefined): number {
  const offered = (offeredVersions ?? "1")
    .split(",")
    .map((v) => Number(v.trim()))
    .filter((v) => Number.isInteger(v));
  return Math.max(-1, ...offered.filter((v) => SUPPORTED_PROTOCOLS.includes(v)));
}

/** The `hello` frame for `spec`; `maxFrame` is the largest frame the agent accepts. */
export function helloFrame(spec: AgentSpec, protocol: number, maxFrame: number, pid: number): HelloFrame {
  const agent: HelloFrame["agent"] = {
    name: spec.name,
    version: spec.version,
    language: "typescript",
    runtime: RUNTIME,
  };
  if (spec.description) agent.description = spec.description;
  if (spec.kind) agent.kind = spec.kind;
  if (spec.tags.length > 0) agent.tags = spec.tags;
  return {
    type: "hello",
    protocol,
    agent,
    actions: [...spec.actions.values()].map((a) => {
      const d: HelloFrame["actions"][number] = { name: a.name, description: a.description };
      if (a.schema !== undefined) d.params_schema = a.schema;
      if (a.idempotent) d.idempotent = true;
      if (a.cacheTtl > 0) d.cache_ttl = a.cacheTtl;
      return d;
    }),
    capabilities: {
      max_concurrency: spec.maxConcurrency,
      cancel: true,
      progress: true,
      ping: spec.ping,
      calls: spec.calls,
      max_frame: maxFrame,
    },
    pid,
  };
}

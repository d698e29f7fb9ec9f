// The seeds' plain-function style: one action `run` that echoes its payload.
import { serveFunction } from "@ether/agent";

export default function run(payload: unknown): unknown {
  return payload;
}

await serveFunction(run, { name: "plain" });

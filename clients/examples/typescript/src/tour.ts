/**
 * A tour of AgentIOService from TypeScript: the directory, a call, a streamed call, a pipe, an error.
 *
 *     (cd clients/typescript && npm install)    # what @etherhost/client needs to be built
 *     (cd clients/examples/typescript && npm install && npm run build)    # the client, then the tour
 *     node clients/examples/typescript/dist/tour.js --address 127.0.0.1:50051 --path .
 *
 * It talks to a host serving the example agents (`make run`) with @connectrpc/connect and the gRPC
 * transport of @connectrpc/connect-node, through the messages and service descriptors that
 * protobuf-es generated in @etherhost/client (clients/typescript). The Python and Go tours beside
 * it do the same steps and print the same lines. ETHER_TOKEN, when set, is sent as a bearer token
 * (a host started with an auth tokens file asks for one); ETHER_TLS_CA, ETHER_TLS_CLIENT_CERT and
 * ETHER_TLS_CLIENT_KEY connect with TLS and a client certificate (docs/auth.md).
 */
import { readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { type JsonObject, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type CallOptions, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
// No .js here: the package exports "./*" as "./dist/*.js".
import {
  type AgentInputSchema,
  AgentIOService,
  type AgentOutput,
  type ExecuteStreamResponse,
  TaskStatus,
} from "@etherhost/client/gen/ether/v1/agent_io_pb";

// gRPC over HTTP/2. An http:// base URL means without TLS, as the host serves on loopback;
// ETHER_TLS_CA switches to https:// trusting that CA, and ETHER_TLS_CLIENT_CERT with
// ETHER_TLS_CLIENT_KEY is the client certificate a host with a client CA asks for.
function transport(address: string) {
  const ca = process.env["ETHER_TLS_CA"];
  if (!ca) {
    return createGrpcTransport({ baseUrl: `http://${address}` });
  }
  const cert = process.env["ETHER_TLS_CLIENT_CERT"];
  const key = process.env["ETHER_TLS_CLIENT_KEY"];
  return createGrpcTransport({
    baseUrl: `https://${address}`,
    nodeOptions: {
      ca: readFileSync(ca),
      ...(cert ? { cert: readFileSync(cert) } : {}),
      ...(key ? { key: readFileSync(key) } : {}),
    },
  });
}

const args = options();
const root = resolve(args.path); // agents run in their own folders: send absolute paths
const token = process.env["ETHER_TOKEN"];

const agents = createClient(AgentIOService, transport(args.address));
// Options for every call: the host passes what is left of the deadline on to the agent.
const call: CallOptions = {
  timeoutMs: 30_000,
  headers: token ? { authorization: `Bearer ${token}` } : {},
};

// 1. The directory, page by page: a host may hold more agents than one page.
async function listAgents(): Promise<void> {
  const names: string[] = [];
  let pageToken = "";
  do {
    const page = await agents.listAgents({ pageToken }, call);
    names.push(...page.agents.map((agent) => agent.name));
    pageToken = page.nextPageToken;
  } while (pageToken);
  console.log(`agents: ${names.join(", ")}`);
}

// 2. One call. A task that fails inside the agent is an AgentOutput with status ERROR, not an
// RPC error: the RPC fails only when the host could not run the task at all.
async function execute(): Promise<void> {
  const input = task("analyze_file", { path: join(root, "README.md") });
  const response = await agents.execute({ input }, call);
  const { status, data, output } = result(response.output);
  console.log(`analyze_file: ${status} lines=${int(data, "lines")} pid=${output.metadata?.pid ?? 0}`);
}

// 3. A streamed call: started, progress and log events as they happen, then the output.
async function executeStream(): Promise<void> {
  const search = { path: join(root, "server"), pattern: "class .*Servicer", glob: "*.py" };
  for await (const event of agents.executeStream({ input: task("search_content", search) }, call)) {
    console.log(`stream ${event.sequence}: ${describe(event)}`);
  }
}

function describe({ event }: ExecuteStreamResponse): string {
  switch (event.case) { // a oneof is a discriminated union: `value` has the case's type
    case "started":
      return `started pid=${event.value.pid}`;
    case "progress":
      return `progress ${event.value.progress.toFixed(0)}/${event.value.total.toFixed(0)}`;
    case "log":
      return `log ${event.value.level} ${event.value.message}`;
    case "output": {
      const { status, data } = result(event.value);
      return `output ${status} count=${int(data, "count")}`;
    }
    default:
      throw new Error("an event with no known case (is the generated code older than the host?)");
  }
}

// 4. A pipe: many tasks over one stream, outputs in the order they finish. When the async iterable
// of inputs ends, the request side half-closes and the host ends the stream once all are done.
async function pipe(): Promise<void> {
  async function* inputs() {
    for (const name of ["README.md", "Makefile", "pyproject.toml"]) {
      yield { input: task("analyze_file", { path: join(root, name) }) };
    }
  }
  const lines: [string, string][] = [];
  for await (const response of agents.pipe(inputs(), call)) {
    const { status, data } = result(response.output);
    const name = basename(text(data, "path"));
    lines.push([name, `pipe: ${name} ${status} lines=${int(data, "lines")}`]);
  }
  // By code point, not localeCompare, so that the order is the one of the other tours.
  lines.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [, line] of lines) console.log(line);
}

// 4b. A batch: the same tasks in one request (inputs), answered in responses that each carry
// every output finished since the previous one (outputs), still in the order they finish. Each
// task runs and fails on its own; maxInFlight counts tasks, not messages.
async function batch(): Promise<void> {
  async function* requests() {
    const files = ["README.md", "Makefile", "pyproject.toml"];
    yield { inputs: files.map((name) => task("analyze_file", { path: join(root, name) })) };
  }
  const lines: [string, string][] = [];
  for await (const response of agents.pipe(requests(), call)) {
    for (const output of response.outputs) {
      const { status, data } = result(output);
      const name = basename(text(data, "path"));
      lines.push([name, `batch: ${name} ${status} lines=${int(data, "lines")}`]);
    }
  }
  lines.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [, line] of lines) console.log(line);
}

// 5. An agent that is not there: NOT_FOUND, with a message saying which.
async function missingAgent(): Promise<void> {
  try {
    await agents.execute({ input: { agent: "no-such-agent", action: "anything" } }, call);
  } catch (err) {
    const error = ConnectError.from(err);
    if (error.code !== Code.NotFound) throw error;
    console.log(`missing agent: ${codeName(error.code)}: ${error.rawMessage}`);
    return;
  }
  throw new Error("the call succeeded");
}

/** A task for scout. `params` is a google.protobuf.Struct, which protobuf-es exposes as plain JSON. */
function task(action: string, params: JsonObject): MessageInitShape<typeof AgentInputSchema> {
  return { agent: "scout", action, params };
}

/** The status name and the data of an output; `data` is a google.protobuf.Value message. */
function result(output: AgentOutput | undefined) {
  if (!output) throw new Error("a response without an output");
  // protobuf-es drops the TASK_STATUS_ prefix from the enum's member names: SUCCESS, ERROR...
  const status = TaskStatus[output.status];
  const data = output.data ? toJson(ValueSchema, output.data) : null;
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    const why = output.error ? `${output.error.code}: ${output.error.message}` : "no data";
    throw new Error(`${output.action} ended ${status} (${why})`);
  }
  return { status, data, output };
}

/** A count from the data: JSON numbers are doubles, so check that it is a whole one. */
function int(data: JsonObject, key: string): number {
  const value = data[key];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new Error(`data.${key} is ${JSON.stringify(value)}, not an integer`);
  }
  return value;
}

function text(data: JsonObject, key: string): string {
  const value = data[key];
  if (typeof value !== "string") throw new Error(`data.${key} is ${JSON.stringify(value)}, not a string`);
  return value;
}

function options() {
  try {
    return parseArgs({
      options: {
        address: { type: "string", default: "127.0.0.1:50051" },
        path: { type: "string", default: "." }, // the folder whose files scout reads
      },
    }).values;
  } catch (err) {
    console.error(`tour: arguments: ${(err as Error).message}`);
    process.exit(1);
  }
}

/** Connect spells codes in camel case (NotFound); gRPC and the other tours in upper snake case. */
function codeName(code: Code): string {
  return Code[code].replace(/(?<=[a-z])(?=[A-Z])/g, "_").toUpperCase();
}

// The steps in order, each under the name a failure is reported with.
const steps = {
  "list agents": listAgents, execute, "execute stream": executeStream, pipe, batch,
  "missing agent": missingAgent,
};
for (const [what, run] of Object.entries(steps)) {
  try {
    await run();
  } catch (err) {
    const error =
      err instanceof ConnectError ? `${codeName(err.code)}: ${err.rawMessage}` : (err as Error).message;
    console.error(`tour: ${what}: ${error}`);
    process.exitCode = 1;
    break;
  }
}

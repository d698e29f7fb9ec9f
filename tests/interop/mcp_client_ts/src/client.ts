// An MCP client written with the official TypeScript SDK, for tests/interop/test_mcp_tools_ts.py.
// It connects to Ether's agents as MCP tools, through `ether mcp` over stdio or /mcp over
// Streamable HTTP, and walks one scenario, printing a JSON line per step on stdout: the tools it
// lists, a call with progress, a tool error, a call cancelled once it reports progress, then
// ("waiting" printed) the tools/list_changed the test causes by deploying an agent.
//
//   node dist/client.js stdio ETHER_BINARY HOST_ADDRESS
//   node dist/client.js http URL [TOKEN]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const say = (step: string, value: unknown) => {
  process.stdout.write(`${JSON.stringify({ step, value })}\n`);
};

function transportFor(argv: string[]): Transport {
  const [kind, target, extra] = argv;
  if (kind === "stdio" && target && extra) {
    return new StdioClientTransport({ command: target, args: ["mcp", "--address", extra] });
  }
  if (kind === "http" && target) {
    const headers: Record<string, string> = extra ? { Authorization: `Bearer ${extra}` } : {};
    return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
  }
  throw new Error("usage: client.js stdio ETHER ADDRESS | http URL [TOKEN]");
}

async function main(): Promise<void> {
  const client = new Client({ name: "ether-ts-test-client", version: "1.0.0" });
  let changed: () => void = () => {};
  const listChanged = new Promise<void>((resolve) => {
    changed = resolve;
  });
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => changed());
  await client.connect(transportFor(process.argv.slice(2)));
  say("capabilities", client.getServerCapabilities());

  const tools = await client.listTools();
  say("tools", tools.tools);

  const progress: unknown[] = [];
  const counted = await client.callTool({ name: "calculator__count", arguments: { n: 3 } }, undefined, {
    onprogress: (report) => progress.push(report),
  });
  say("count", { result: counted, progress });

  say("refuse", await client.callTool({ name: "calculator__refuse", arguments: { message: "not today" } }));

  const abort = new AbortController();
  const outcome = client
    .callTool({ name: "calculator__wait", arguments: { label: "cancel-ts" } }, undefined, {
      signal: abort.signal,
      onprogress: () => abort.abort("the test cancels it"),
    })
    .then(
      () => "finished",
      (error: unknown) => `rejected: ${error instanceof Error ? error.message : String(error)}`,
    );
  say("cancel", await outcome);

  say("waiting", null);
  await listChanged;
  say("changed", (await client.listTools()).tools.map((tool) => tool.name));
  await client.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

// An MCP stdio server written with the official TypeScript SDK, for the MCP agent tests
// (tests/interop/test_mcp_agents_ts.py). Its tools: one without an output schema (echo), one
// with (add), progress (count), a slow tool that notes its cancellation on stderr (sleep), a
// tool error (fail), a log notification (shout), a tool list that changes (grow adds extra), a
// crash mid-call (crash) and garbage on stdout (garbage). tools/list answers in pages of two,
// so the host must follow nextCursor to see them all.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ListToolsRequestSchema, type ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const server = new McpServer(
  { name: "ts-tools", version: "1.2.3" },
  { capabilities: { logging: {} }, instructions: "Test tools written with the TypeScript MCP SDK." },
);

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });

server.registerTool(
  "echo",
  { description: "Echo the text back.", inputSchema: { text: z.string() } },
  async ({ text: value }) => text(value),
);

server.registerTool(
  "add",
  {
    description: "Add two integers.",
    inputSchema: { a: z.number().int(), b: z.number().int() },
    outputSchema: { total: z.number().int(), terms: z.array(z.number().int()) },
    annotations: { idempotentHint: true },
  },
  async ({ a, b }) => {
    const result = { total: a + b, terms: [a, b] };
    return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
  },
);

server.registerTool(
  "count",
  { description: "Count to n, reporting progress at each step.", inputSchema: { n: z.number().int() } },
  async ({ n }, extra) => {
    const token = extra._meta?.progressToken;
    for (let step = 1; step <= n; step++) {
      if (token !== undefined) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: step, total: n, message: `step ${step}` },
        });
      }
    }
    return text(`counted to ${n}`);
  },
);

server.registerTool(
  "sleep",
  { description: "Sleep; says so on stderr when cancelled.", inputSchema: { seconds: z.number() } },
  async ({ seconds }, extra) => {
    const token = extra._meta?.progressToken;
    if (token !== undefined) {
      // The call has reached the handler: a test may cancel it now.
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: 0, total: seconds, message: "sleeping" },
      });
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(text("slept")), seconds * 1000);
      extra.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        process.stderr.write(`sleep of ${seconds}s cancelled\n`);
        reject(new Error("cancelled"));
      });
    });
  },
);

server.registerTool(
  "fail",
  { description: "Fail with the message.", inputSchema: { message: z.string() } },
  async ({ message }) => ({ ...text(message), isError: true }),
);

server.registerTool(
  "shout",
  { description: "Log the text as a notifications/message, then answer.", inputSchema: { text: z.string() } },
  async ({ text: value }) => {
    await server.sendLoggingMessage({ level: "warning", logger: "shout", data: `shouting ${value}` });
    return text(value.toUpperCase());
  },
);

server.registerTool("grow", { description: "Add the tool 'extra' (the SDK announces the new list)." }, async () => {
  server.registerTool("extra", { description: "Added by grow." }, async () => text("extra here"));
  return text("grown");
});

server.registerTool("crash", { description: "Exit the process in the middle of the call." }, async () => {
  process.stderr.write("crashing on purpose\n");
  process.exit(3);
});

server.registerTool("garbage", { description: "Write a line of garbage to stdout, then answer." }, async () => {
  process.stdout.write("this line is not JSON-RPC\n");
  return text("still here");
});

// tools/list in pages of two: the SDK's own handler lists every tool, this one pages its answer.
const PAGE = 2;
const handlers = (server.server as unknown as { _requestHandlers: Map<string, Function> })._requestHandlers;
const listAll = handlers.get("tools/list");
if (listAll === undefined) throw new Error("the SDK registered no tools/list handler");
server.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
  const all = (await listAll(request, extra)) as ListToolsResult;
  const start = Number(request.params?.cursor ?? "0");
  const page: ListToolsResult = { tools: all.tools.slice(start, start + PAGE) };
  if (start + PAGE < all.tools.length) page.nextCursor = String(start + PAGE);
  return page;
});

await server.connect(new StdioServerTransport());

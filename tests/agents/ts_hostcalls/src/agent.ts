// tshostcalls: exercises the TypeScript SDK's typed host calls: term.run (runCommand),
// msg.send / msg.receive (messages) and on_message (onMessage), and its channel hygiene.
import { execFileSync } from "node:child_process";
import {
  Agent,
  CTX_CALLS,
  MSG_CALLS,
  TERMINAL_CALLS,
  messages,
  onMessage,
  runCommand,
  type JsonValue,
  type Message,
} from "@ether/agent";

export const agent = new Agent({
  name: "tshostcalls",
  maxConcurrency: 4,
  calls: ["agent.call", ...CTX_CALLS, ...MSG_CALLS, ...TERMINAL_CALLS],
});

const handled: Message[] = [];

agent.action<{ command: string }>(
  "run",
  { description: "Run a command with term.run; return its output." },
  async ({ command }, ctx) => {
    const result = await runCommand(ctx, command, { timeout: 30 });
    return { output: result.output, reason: result.reason, exit_code: result.exitCode };
  },
);

agent.action<{ text: string }>(
  "noisy_child",
  { description: "Start a child that writes `text` to the stdout it inherits (fd 1)." },
  async ({ text }) => {
    execFileSync("sh", ["-c", 'printf "%s\\n" "$1"', "sh", text], { stdio: ["ignore", "inherit", "inherit"] });
    return { done: true };
  },
);

agent.action<{ agent: string; type?: string; data?: JsonValue }>(
  "send",
  { description: "Send a message to an agent with msg.send." },
  async (params, ctx) => {
    const sent = await messages(ctx).send(params.agent, params.type ?? "note", params.data ?? null);
    return { id: sent.id, sender: sent.sender };
  },
);

agent.action<{ wait?: number }>(
  "receive",
  { description: "Take messages from the mailbox with msg.receive." },
  async (params, ctx) => ({ messages: await messages(ctx).receive(10, (params.wait ?? 0) * 1000) }),
);

const waiters: Array<() => void> = [];

agent.action<{ id?: string }>(
  "handled",
  { description: "Messages the on_message handler saw; with id, first wait until it saw that one." },
  async ({ id }, ctx) => {
    // Wait on the handler itself (not a poll): each handled message wakes the waiters.
    while (id !== undefined && !handled.some((m) => m.id === id)) {
      if (ctx.signal.aborted) throw new Error(`message ${id} was not handled before the deadline`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    return { messages: handled };
  },
);

onMessage(agent, (message) => {
  handled.push(message);
  for (const wake of waiters.splice(0)) wake();
  return { seen: message.id };
});

await agent.serve();

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, it } from "node:test";
import { Agent } from "./agent.js";
import { AgentError } from "./errors.js";
import { Output } from "./output.js";
import { Session, type FrameSink } from "./session.js";

type Frame = Record<string, any>;

const ENV = { ETHER_HOST_COOKIE: "ether-agent-v1", ETHER_PROTOCOL_VERSIONS: "1", ETHER_AGENT_NAME: "tester" };

class Sink implements FrameSink {
  frames: Frame[] = [];
  closed = false;
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  writeLine(line: string): void {
    assert.ok(!line.includes("\n"), "a frame is one line");
    const frame = JSON.parse(line) as Frame;
    this.frames.push(frame);
    const i = this.#waiters.findIndex((w) => w.match(frame));
    if (i !== -1) this.#waiters.splice(i, 1)[0]!.resolve(frame);
  }
  async flush(): Promise<void> {}
  next(match: (f: Frame) => boolean): Promise<Frame> {
    const seen = this.frames.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
  result(id: string): Promise<Frame> {
    return this.next((f) => f["type"] === "result" && f["id"] === id);
  }
}

function testAgent(): Agent {
  const agent = new Agent({ name: "tester", version: "2.0", maxConcurrency: 2, calls: ["agent.call"], kind: "io_gateway", tags: ["t"] });
  agent.action("echo", { description: "echo", idempotent: true, cacheTtl: 90 }, (p) => p);
  agent.action("sleep", { schema: { type: "object", required: ["ms"] } }, async ({ ms }: { ms: number }, ctx) => {
    await sleep(ms, undefined, { signal: ctx.signal });
    return { slept: ms };
  });
  agent.action("deaf", async ({ ms }: { ms: number }) => {
    await sleep(ms);
    return { deaf: true };
  });
  agent.action("fail", () => {
    throw new AgentError("nope", "said no", { retryable: true });
  });
  agent.action("big", ({ bytes }: { bytes: number }) => ({ data: "x".repeat(bytes) }));
  agent.action("call", (p: { agent: string; action: string }, ctx) => ctx.callAgent(p.agent, p.action, { q: 1 }));
  agent.action("undeclared", (_p, ctx) => ctx.hostCall("net.fetch", { url: "http://x" }));
  agent.action("progress", (_p, ctx) => {
    ctx.progress(1, 2, "half");
    ctx.log.debug("hidden at info");
    ctx.log.warn("careful", { n: 1 });
    ctx.cost(0.25, "m1");
    return new Output({ ok: true }, { nextActions: [{ agent: "report", action: "render", reason: "show" }] });
  });
  agent.action("ctx", (_p, ctx) => ({
    taskId: ctx.taskId,
    attempt: ctx.attempt,
    trace: { ...ctx.trace },
    config: ctx.config,
    hasDeadline: ctx.deadline !== undefined,
  }));
  return agent;
}

function start(env: Record<string, string> = ENV, agent = testAgent(), extra: { eofGraceMs?: number; abortWaitMs?: number } = {}) {
  const input = new PassThrough();
  const sink = new Sink();
  const diag: string[] = [];
  const session = new Session(agent.spec(env), { input, sink, env, diag: (l) => diag.push(l), pid: 42, ...extra });
  const done = session.run();
  const send = (frame: Frame | string) => input.write(typeof frame === "string" ? frame : `${JSON.stringify(frame)}\n`);
  const welcome = (extraWelcome: Frame = {}) => send({ type: "welcome", protocol: 1, max_frame: 16 << 20, config: { k: "v" }, log_level: "info", ...extraWelcome });
  return { input, sink, diag, session, done, send, welcome };
}

describe("Session handshake", () => {
  it("refuses to run without the host cookie: exit 78, no frame", async () => {
    const { done, sink, diag } = start({ ETHER_PROTOCOL_VERSIONS: "1" });
    assert.equal(await done, 78);
    assert.deepEqual(sink.frames, []);
    assert.match(diag.join("\n"), /started by the host/);
  });

  it("writes fatal protocol_version_unsupported and exits 78 when no offered version fits", async () => {
    const { done, sink } = start({ ...ENV, ETHER_PROTOCOL_VERSIONS: "2,3" });
    assert.equal(await done, 78);
    assert.equal(sink.frames.length, 1);
    assert.equal(sink.frames[0]!["type"], "fatal");
    assert.equal(sink.frames[0]!["code"], "protocol_version_unsupported");
  });

  it("says hello first with identity, actions and capabilities, picking the highest version it speaks", async () => {
    const { sink, input, done } = start({ ...ENV, ETHER_PROTOCOL_VERSIONS: "3, 1,2" });
    const hello = sink.frames[0]!;
    assert.deepEqual(hello, {
      type: "hello",
      protocol: 1,
      agent: { name: "tester", version: "2.0", language: "typescript", runtime: `node ${process.versions.node}`, kind: "io_gateway", tags: ["t"] },
      actions: [
        { name: "echo", description: "echo", idempotent: true, cache_ttl: 90 },
        { name: "sleep", description: "", params_schema: { type: "object", required: ["ms"] } },
        { name: "deaf", description: "" },
        { name: "fail", description: "" },
        { name: "big", description: "" },
        { name: "call", description: "" },
        { name: "undeclared", description: "" },
        { name: "progress", description: "" },
        { name: "ctx", description: "" },
      ],
      capabilities: { max_concurrency: 2, cancel: true, progress: true, ping: true, calls: ["agent.call"], max_frame: 16 << 20 },
      pid: 42,
    });
    input.end();
    assert.equal(await done, 0);
  });

  it("exits 78 when welcome carries an error", async () => {
    const { send, done } = start();
    send({ type: "welcome", error: { code: "protocol_version_unsupported", message: "no", data: { supported: [2] } } });
    assert.equal(await done, 78);
  });
});

describe("Session tasks", () => {
  it("runs tasks, answers ping at once and skips lines that are not frames", async () => {
    const { send, welcome, sink, input, done, diag } = start();
    welcome();
    send("garbage\n");
    send(Buffer.from([0xff, 0xfe, 0x0a]).toString("latin1"));
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 50 } });
    send({ type: "ping", id: "p-1" });
    send({ type: "task", id: "h-2", action: "echo", params: { text: "héllo ✓ 😀" } });
    assert.deepEqual(await sink.result("h-2"), { type: "result", id: "h-2", status: "ok", result: { text: "héllo ✓ 😀" } });
    assert.deepEqual(await sink.result("h-1"), { type: "result", id: "h-1", status: "ok", result: { slept: 50 } });
    const order = sink.frames.map((f) => `${f["type"]}:${f["id"]}`);
    assert.ok(order.indexOf("pong:p-1") < order.indexOf("result:h-1"), "ping answered while a task runs");
    assert.equal(diag.filter((l) => l.includes("not a frame")).length, 2);
    input.end();
    assert.equal(await done, 0);
  });

  it("gives the context the task's ids, attempt, trace, config and deadline", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-3", action: "ctx", params: {}, deadline_ms: "5000", attempt: 2, task_id: "t-9", trace: { root_id: "t-1", parent_id: "t-2", depth: 1 } });
    const r = await sink.result("h-3");
    assert.deepEqual(r["result"], { taskId: "t-9", attempt: 2, trace: { rootId: "t-1", parentId: "t-2", depth: 1 }, config: { k: "v" }, hasDeadline: true });
  });

  it("reports errors with their code, unknown actions and invalid params", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "fail" });
    send({ type: "task", id: "h-2", action: "missing" });
    send({ type: "task", id: "h-3", action: "sleep", params: {} });
    assert.deepEqual((await sink.result("h-1"))["error"], { code: "nope", message: "said no", retryable: true });
    assert.equal((await sink.result("h-2"))["error"]["code"], "unknown_action");
    assert.equal((await sink.result("h-3"))["error"]["code"], "invalid_params");
  });

  it("sends progress, log frames above the log level, cost, and partial/next actions from Output", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "progress" });
    const r = await sink.result("h-1");
    assert.deepEqual(r, {
      type: "result",
      id: "h-1",
      status: "ok",
      result: { ok: true },
      metadata: { cost: 0.25, model: "m1" },
      next_actions: [{ agent: "report", action: "render", reason: "show" }],
    });
    assert.deepEqual(sink.frames.find((f) => f["type"] === "progress"), { type: "progress", id: "h-1", progress: 1, total: 2, message: "half" });
    const logs = sink.frames.filter((f) => f["type"] === "log");
    assert.deepEqual(logs, [{ type: "log", level: "warning", msg: "careful", logger: "tester", fields: { n: 1 }, task_id: "h-1" }]);
  });

  it("runs at most maxConcurrency tasks at once and queues the rest", async () => {
    const { send, welcome, sink } = start();
    welcome();
    const t0 = Date.now();
    for (let i = 1; i <= 4; i++) send({ type: "task", id: `h-${i}`, action: "sleep", params: { ms: 100 } });
    await Promise.all([1, 2, 3, 4].map((i) => sink.result(`h-${i}`)));
    assert.ok(Date.now() - t0 >= 190, "two waves of two");
  });

  it("answers a cancel with a cancelled result, also for a queued task", async () => {
    const { send, welcome, sink } = start();
    welcome();
    for (let i = 1; i <= 3; i++) send({ type: "task", id: `h-${i}`, action: "sleep", params: { ms: 10_000 } });
    send({ type: "cancel", id: "h-3", reason: "user" });
    send({ type: "cancel", id: "h-1", reason: "user" });
    assert.deepEqual((await sink.result("h-3"))["error"], { code: "cancelled", message: "user" });
    assert.deepEqual((await sink.result("h-1"))["error"], { code: "cancelled", message: "user" });
    send({ type: "cancel", id: "h-2" });
    assert.equal((await sink.result("h-2"))["error"]["code"], "cancelled");
  });

  it("aborts the signal at the deadline and reports timeout", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 10_000 }, deadline_ms: 50 });
    assert.equal((await sink.result("h-1"))["error"]["code"], "timeout");
  });

  it("turns a result over the max frame into frame_too_large and goes on", async () => {
    const { send, welcome, sink } = start({ ...ENV, ETHER_MAX_FRAME: "1000" });
    welcome({ max_frame: 100_000 });
    send({ type: "task", id: "h-1", action: "big", params: { bytes: 2000 } });
    send({ type: "task", id: "h-2", action: "big", params: { bytes: 900 } });
    const r = await sink.result("h-1");
    assert.equal(r["error"]["code"], "frame_too_large");
    assert.equal(r["error"]["data"]["max_frame"], 1000);
    assert.equal((await sink.result("h-2"))["status"], "ok");
  });

  it("fails an incoming task over the max frame by its recovered id and reads on", async () => {
    const { send, welcome, sink } = start({ ...ENV, ETHER_MAX_FRAME: "200" });
    welcome();
    send({ type: "task", id: "h-1", action: "echo", params: { x: "y".repeat(500) } });
    send({ type: "task", id: "h-2", action: "echo", params: { x: 1 } });
    assert.equal((await sink.result("h-1"))["error"]["code"], "frame_too_large");
    assert.equal((await sink.result("h-2"))["status"], "ok");
  });

  it("makes agent.call host calls and delivers the reply's result or error", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "call", params: { agent: "wc", action: "count" } });
    const call = await sink.next((f) => f["type"] === "call");
    assert.deepEqual(call, { type: "call", id: "a-1", method: "agent.call", params: { agent: "wc", action: "count", params: { q: 1 } }, task_id: "h-1" });
    send({ type: "reply", id: "a-99", status: "ok", result: {} });
    send({ type: "reply", id: "a-1", status: "ok", result: { words: 3 } });
    assert.deepEqual((await sink.result("h-1"))["result"], { words: 3 });
    send({ type: "task", id: "h-2", action: "call", params: { agent: "wc", action: "count" } });
    await sink.next((f) => f["type"] === "call" && f["id"] === "a-2");
    send({ type: "reply", id: "a-2", status: "error", error: { code: "permission_denied", message: "not allowed" } });
    assert.deepEqual((await sink.result("h-2"))["error"], { code: "permission_denied", message: "not allowed" });
  });

  it("refuses a host call the agent did not declare, without asking the host", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "undeclared" });
    assert.equal((await sink.result("h-1"))["error"]["code"], "permission_denied");
    assert.ok(!sink.frames.some((f) => f["type"] === "call"));
  });

  it("cancels its open call when the task is cancelled", async () => {
    const { send, welcome, sink } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "call", params: { agent: "wc", action: "count" } });
    await sink.next((f) => f["type"] === "call");
    send({ type: "cancel", id: "h-1" });
    assert.equal((await sink.result("h-1"))["error"]["code"], "cancelled");
    assert.ok(sink.frames.some((f) => f["type"] === "cancel" && f["id"] === "a-1"));
  });

  it("runs the seeds' envelope: a task with payload and no action, before any welcome", async () => {
    const agent = new Agent();
    agent.action("run", (p) => ({ got: p }));
    const { send, sink } = start(ENV, agent);
    send({ id: "h-1", type: "task", payload: { q: 1 } });
    assert.deepEqual(await sink.result("h-1"), { type: "result", id: "h-1", status: "ok", result: { got: { q: 1 } } });
  });
});

describe("Session shutdown", () => {
  it("on shutdown answers new tasks shutting_down, lets in-flight ones finish within the grace and exits 0", async () => {
    const { send, welcome, sink, done } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 100 } });
    send({ type: "shutdown", grace_ms: 5000, reason: "stop" });
    send({ type: "task", id: "h-2", action: "echo" });
    assert.deepEqual((await sink.result("h-2"))["error"]["code"], "shutting_down");
    assert.equal(await done, 0);
    assert.deepEqual((await sink.result("h-1"))["result"], { slept: 100 });
  });

  it("aborts in-flight tasks when the grace ends, and writes results for handlers that ignore it", async () => {
    const { send, welcome, sink, done } = start(ENV, testAgent(), { abortWaitMs: 100 });
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 10_000 } });
    send({ type: "task", id: "h-2", action: "deaf", params: { ms: 1500 } });
    const t0 = Date.now();
    send({ type: "shutdown", grace_ms: 50 });
    assert.equal(await done, 0);
    assert.ok(Date.now() - t0 < 2000);
    assert.equal((await sink.result("h-1"))["error"]["code"], "cancelled");
    assert.equal((await sink.result("h-2"))["error"]["code"], "cancelled");
  });

  it("treats stdin EOF as shutdown: in-flight tasks finish, then exit 0", async () => {
    const { send, welcome, sink, done, input } = start();
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 50 } });
    input.end();
    assert.equal(await done, 0);
    assert.equal((await sink.result("h-1"))["status"], "ok");
  });

  it("lets a second shutdown shorten the grace", async () => {
    const { send, welcome, sink, done } = start(ENV, testAgent(), { abortWaitMs: 100 });
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 10_000 } });
    send({ type: "shutdown", grace_ms: 60_000 });
    send({ type: "shutdown", grace_ms: 10 });
    const t0 = Date.now();
    assert.equal(await done, 0);
    assert.ok(Date.now() - t0 < 2000);
    assert.equal((await sink.result("h-1"))["error"]["code"], "cancelled");
  });

  it("keeps the shutdown grace when stdin closes right after the shutdown frame", async () => {
    const { send, welcome, sink, done, input } = start(ENV, testAgent(), { eofGraceMs: 0 });
    welcome();
    send({ type: "task", id: "h-1", action: "sleep", params: { ms: 100 } });
    send({ type: "shutdown", grace_ms: 5000 });
    input.end();
    assert.equal(await done, 0);
    assert.equal((await sink.result("h-1"))["status"], "ok");
  });
});

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { Agent } from "./agent.js";
import { Session, type FrameSink } from "./session.js";

type Frame = Record<string, any>;

const ENV = { ETHER_HOST_COOKIE: "ether-agent-v1", ETHER_PROTOCOL_VERSIONS: "1", ETHER_AGENT_NAME: "tracer" };
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TASK_SPAN = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${TASK_SPAN}-01`;
const TRACESTATE = "ether=t61rcWkgMzE,vendor=x";

class Sink implements FrameSink {
  frames: Frame[] = [];
  closed = false;
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  writeLine(line: string): void {
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
}

/** A session of an agent whose `relay` makes one agent.call (with `traceParent` when its params name one). */
function start() {
  const agent = new Agent({ name: "tracer", calls: ["agent.call"] });
  agent.action("relay", async (p: { explicit?: string }, ctx) => {
    await ctx.callAgent("other", "echo", {}, p.explicit === undefined ? {} : { traceParent: p.explicit });
    return { parent: ctx.traceParent ?? null, state: ctx.traceState ?? null };
  });
  const input = new PassThrough();
  const sink = new Sink();
  const session = new Session(agent.spec(ENV), { input, sink, env: ENV, diag: () => {}, pid: 42 });
  void session.run();
  const send = (frame: Frame) => input.write(`${JSON.stringify(frame)}\n`);
  send({ type: "welcome", protocol: 1, max_frame: 16 << 20, config: {}, log_level: "info" });
  /** Runs one relay task; resolves to its call frame and its result. */
  const relay = async (id: string, extra: Frame, params: Frame = {}) => {
    send({ type: "task", id, action: "relay", params, ...extra });
    const call = await sink.next((f) => f["type"] === "call" && f["task_id"] === id);
    send({ type: "reply", id: call["id"], status: "ok", result: { data: 1 } });
    const result = await sink.next((f) => f["type"] === "result" && f["id"] === id);
    assert.equal(result["status"], "ok", JSON.stringify(result));
    return { call, out: result["result"] as Frame };
  };
  return { relay, end: () => input.end() };
}

describe("trace context", () => {
  it("shows the task's traceparent and tracestate to the handler, and its calls carry them", async () => {
    const { relay, end } = start();
    const { call, out } = await relay("h-1", { traceparent: TRACEPARENT, tracestate: TRACESTATE });
    assert.equal(call["traceparent"], TRACEPARENT);
    assert.equal(call["tracestate"], TRACESTATE);
    assert.deepEqual(out, { parent: TRACEPARENT, state: TRACESTATE });
    end();
  });

  it("sends calls of an untraced task without trace context", async () => {
    const { relay, end } = start();
    const { call, out } = await relay("h-1", {});
    assert.ok(!("traceparent" in call) && !("tracestate" in call), JSON.stringify(call));
    assert.deepEqual(out, { parent: null, state: null });
    end();
  });

  it("lets a call's traceParent option override the task's", async () => {
    const { relay, end } = start();
    const mine = `00-${TRACE_ID}-1111111111111111-01`;
    const { call, out } = await relay("h-1", { traceparent: TRACEPARENT, tracestate: TRACESTATE }, { explicit: mine });
    assert.equal(call["traceparent"], mine);
    assert.ok(!("tracestate" in call), JSON.stringify(call));
    assert.equal(out["parent"], TRACEPARENT);
    end();
  });

  it("drops a malformed traceparent (and its tracestate) without breaking the task", async () => {
    const { relay, end } = start();
    const bad: unknown[] = [
      "garbage",
      123,
      { x: 1 },
      `00-${TRACE_ID.toUpperCase()}-${TASK_SPAN}-01`, // lowercase hex only
      `ff-${TRACE_ID}-${TASK_SPAN}-01`, // version ff is invalid
      `00-${"0".repeat(32)}-${TASK_SPAN}-01`, // all-zero trace id
      `00-${TRACE_ID}-${"0".repeat(16)}-01`, // all-zero span id
      `${TRACEPARENT}-extra`, // version 00 has exactly four fields
    ];
    for (const [n, value] of bad.entries()) {
      const { call, out } = await relay(`h-${n}`, { traceparent: value, tracestate: TRACESTATE });
      assert.ok(!("traceparent" in call) && !("tracestate" in call), `${JSON.stringify(value)}: ${JSON.stringify(call)}`);
      assert.deepEqual(out, { parent: null, state: null }, JSON.stringify(value));
    }
    // A later version may add fields; its first four are read as level 1's.
    const future = `01-${TRACE_ID}-${TASK_SPAN}-01-more`;
    const { call, out } = await relay("h-future", { traceparent: future });
    assert.equal(call["traceparent"], future);
    assert.equal(out["parent"], future);
    end();
  });
});

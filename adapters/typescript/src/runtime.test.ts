// The runtime as the host runs it: a real process, real pipes, real signals.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { AgentProcess, FIXTURE_FUNCTION } from "./testdata/harness.js";

describe("runtime", () => {
  it("keeps the link clean when user code console.logs and writes to process.stdout", async () => {
    const agent = AgentProcess.runtime();
    try {
      await agent.handshake();
      agent.task("h-1", "print", { text: "not a frame" });
      assert.deepEqual((await agent.result("h-1"))["result"], { printed: true });
      agent.task("h-2", "echo", { after: true });
      await agent.result("h-2");
      assert.deepEqual(agent.noise, []);
      assert.match(agent.stderr, /not a frame\nnot a frame\n/);
    } finally {
      agent.kill();
    }
  });

  it("writes a 5 MiB result whole through the pipe and answers many tasks out of order", async () => {
    const agent = AgentProcess.runtime();
    try {
      await agent.handshake();
      agent.task("h-big", "big", { bytes: 5 << 20 });
      for (let i = 0; i < 100; i++) agent.task(`h-${i}`, "sleep", { ms: (i * 7) % 50 });
      const big = await agent.result("h-big");
      assert.equal(big["result"]["data"].length, 5 << 20);
      await Promise.all(Array.from({ length: 100 }, (_, i) => agent.result(`h-${i}`)));
      assert.equal(agent.frames.filter((f) => f["type"] === "result").length, 101);
    } finally {
      agent.kill();
    }
  });

  it("exits 0 on stdin EOF", async () => {
    const agent = AgentProcess.runtime();
    await agent.handshake();
    agent.task("h-1", "sleep", { ms: 100 });
    agent.child.stdin.end();
    const { code } = await agent.exited;
    assert.equal(code, 0);
    assert.equal((await agent.result("h-1"))["status"], "ok");
  });

  it("treats SIGTERM as shutdown and ignores SIGINT", async () => {
    const agent = AgentProcess.runtime();
    await agent.handshake();
    agent.task("h-1", "sleep", { ms: 60_000 });
    agent.child.kill("SIGINT");
    agent.task("h-2", "echo", { alive: true });
    await agent.result("h-2");
    agent.child.kill("SIGTERM");
    const { code, signal } = await agent.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null });
    assert.equal((await agent.result("h-1"))["error"]["code"], "cancelled");
  });

  it("exits 78 with a hint when started without the host cookie", async () => {
    const agent = AgentProcess.runtime(undefined, { ETHER_HOST_COOKIE: "" });
    const { code } = await agent.exited;
    assert.equal(code, 78);
    assert.deepEqual(agent.frames, []);
    assert.match(agent.stderr, /ETHER_HOST_COOKIE/);
  });

  it("exits 78 with a fatal frame when the module cannot be loaded", async () => {
    const agent = AgentProcess.runtime("/nonexistent/agent.js");
    const { code } = await agent.exited;
    assert.equal(code, 78);
    assert.equal(agent.frames[0]?.["type"], "fatal");
  });

  it("serves a plain function module as the action run, with the seeds' envelope", async () => {
    const agent = AgentProcess.runtime(FIXTURE_FUNCTION);
    try {
      const hello = await agent.next((f) => f["type"] === "hello");
      assert.deepEqual(hello["actions"].map((a: { name: string }) => a.name), ["run"]);
      agent.send({ id: "h-1", type: "task", payload: { q: [1, 2] } });
      assert.deepEqual((await agent.result("h-1"))["result"], { echoed: { q: [1, 2] } });
    } finally {
      agent.kill();
    }
  });

  it("kills its process group, grandchildren included, when the host is gone", async () => {
    // A stand-in host: the agent's ETHER_HOST_PPID names it; it is killed once the agent runs.
    const fakeHost = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"]);
    const agent = new AgentProcess(
      [
        "--input-type=module",
        "-e",
        `const { spawn } = await import("node:child_process");
         const g = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); console.error('grandchild ' + process.pid); setInterval(() => {}, 1000)"], { stdio: ["ignore", "inherit", "inherit"] });
         const { Agent } = await import(${JSON.stringify(new URL("./index.js", import.meta.url).href)});
         await new Agent().serve();`,
      ],
      { ETHER_HOST_PPID: String(fakeHost.pid) },
    );
    await agent.next((f) => f["type"] === "hello");
    let grandchild = 0;
    for (let i = 0; i < 100 && grandchild === 0; i++) {
      grandchild = Number(/grandchild (\d+)/.exec(agent.stderr)?.[1] ?? 0);
      if (grandchild === 0) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(grandchild > 0, "the grandchild started");
    fakeHost.kill("SIGKILL");
    await once(fakeHost, "exit");
    const { signal } = await agent.exited;
    assert.equal(signal, "SIGKILL");
    let alive = true;
    for (let i = 0; i < 20 && alive; i++) {
      alive = running(grandchild);
      if (alive) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(alive, false, "the grandchild died with the group");
  });
});

/** Whether `pid` still runs: a zombie has died already and only waits for whoever reaps it
 * (the orphaned grandchild's new parent, which may take its time). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

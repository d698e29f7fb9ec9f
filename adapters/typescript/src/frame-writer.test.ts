import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { FrameWriter } from "./frame-writer.js";

describe("FrameWriter", () => {
  // Every directory a test makes is removed at the end: a run leaves nothing in /tmp.
  const made: string[] = [];
  const scratch = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "ether-fw-"));
    made.push(dir);
    return join(dir, "frames");
  };
  after(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });

  it("writes whole frames in order, batched or not, and flush waits for all of them", async () => {
    const path = scratch();
    const fd = openSync(path, "w");
    const writer = new FrameWriter(fd);
    const expected: string[] = [];
    for (let i = 0; i < 500; i++) {
      const line = JSON.stringify({ type: "result", id: `h-${i}`, result: "x".repeat(i * 37) });
      expected.push(line);
      writer.writeLine(line);
    }
    const big = JSON.stringify({ type: "result", id: "big", result: "y".repeat(3 << 20) });
    writer.writeLine(big);
    expected.push(big);
    assert.ok(writer.pending > 0);
    await writer.flush();
    assert.equal(writer.pending, 0);
    closeSync(fd);
    assert.equal(readFileSync(path, "utf8"), `${expected.join("\n")}\n`);
  });

  it("flush resolves at once when nothing is queued", async () => {
    const writer = new FrameWriter(-1);
    await writer.flush();
  });

  it("marks the stream closed and drops frames after a write error", async () => {
    const errors: string[] = [];
    const writer = new FrameWriter(987_654, (err) => errors.push(err.code ?? ""));
    writer.writeLine("{}");
    await writer.flush();
    assert.ok(writer.closed);
    assert.deepEqual(errors, ["EBADF"]);
    writer.writeLine("{}");
    assert.equal(writer.pending, 0);
  });

  it("puts a frame in a pipe with room before writeLine returns, and keeps order when it is full", async () => {
    const fifo = scratch();
    execFileSync("mkfifo", [fifo]);
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(fifo, "w");
    const writer = new FrameWriter(fd);
    const chunk = Buffer.alloc(1 << 16);
    const readAvailable = (): string => {
      let text = "";
      for (;;) {
        try {
          const n = readSync(reader, chunk);
          if (n === 0) return text;
          text += chunk.toString("utf8", 0, n);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "EAGAIN") return text;
          throw err;
        }
      }
    };
    writer.writeLine('{"type":"pong","id":"1"}');
    assert.equal(writer.pending, 0);
    assert.equal(readAvailable(), '{"type":"pong","id":"1"}\n'); // no await: already there
    // Far more than a pipe holds: part goes at once, the rest queued, the small ones after it.
    const expected = [JSON.stringify({ id: "big", result: "z".repeat(4 << 20) })];
    writer.writeLine(expected[0]!);
    for (let i = 0; i < 50; i++) {
      expected.push(JSON.stringify({ id: `h-${i}` }));
      writer.writeLine(expected[i + 1]!);
    }
    assert.ok(writer.pending > 0);
    let flushed = false;
    const done = writer.flush().then(() => {
      flushed = true;
    });
    let received = "";
    while (!flushed) {
      received += readAvailable();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await done;
    received += readAvailable();
    closeSync(fd);
    closeSync(reader);
    assert.equal(received, `${expected.join("\n")}\n`);
  });
});

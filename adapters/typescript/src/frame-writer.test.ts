import assert from "node:assert/strict";
import { mkdtempSync, openSync, closeSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { FrameWriter } from "./frame-writer.js";

describe("FrameWriter", () => {
  it("writes whole frames in order, batched or not, and flush waits for all of them", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "ether-fw-")), "frames");
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
});

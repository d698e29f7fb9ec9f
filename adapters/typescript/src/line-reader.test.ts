import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LineSplitter, decodeLine, recoverHead, type LineEvent } from "./line-reader.js";

function collect(splitter: LineSplitter, chunks: Buffer[]): LineEvent[] {
  const out: LineEvent[] = [];
  for (const c of chunks) out.push(...splitter.push(c));
  out.push(...splitter.end());
  return out;
}

const lines = (events: LineEvent[]) => events.map((e) => (e.kind === "line" ? e.line.toString() : `<${e.size}>`));

describe("LineSplitter", () => {
  it("splits lines across chunk borders, byte by byte too", () => {
    const data = Buffer.from('{"a":1}\n{"b":"é"}\r\n\nlast');
    assert.deepEqual(lines(collect(new LineSplitter(1024), [data])), ['{"a":1}', '{"b":"é"}', "", "last"]);
    const bytes = [...data].map((b) => Buffer.from([b]));
    assert.deepEqual(lines(collect(new LineSplitter(1024), bytes)), ['{"a":1}', '{"b":"é"}', "", "last"]);
  });

  it("has no 64 KiB limit: a 1 MiB line passes under a larger max frame", () => {
    const big = `{"x":"${"y".repeat(1 << 20)}"}`;
    const events = collect(new LineSplitter(2 << 20), [Buffer.from(big.slice(0, 70_000)), Buffer.from(`${big.slice(70_000)}\n`)]);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.kind === "line" && events[0]!.line.length, big.length);
  });

  it("skips a line over the max frame to the next newline and keeps its head", () => {
    const long = `{"type":"task","id":"h-9","params":"${"z".repeat(500)}"}`;
    const events = collect(new LineSplitter(100), [Buffer.from(`${long.slice(0, 50)}`), Buffer.from(`${long.slice(50)}\n{"ok":1}\n`)]);
    assert.equal(events.length, 2);
    const first = events[0]!;
    assert.equal(first.kind, "oversized");
    if (first.kind === "oversized") {
      assert.equal(first.size, long.length);
      assert.deepEqual(recoverHead(first.head), { id: "h-9", type: "task" });
    }
    assert.deepEqual(lines([events[1]!]), ['{"ok":1}']);
  });

  it("checks the limit on whole lines: exactly max passes, max+1 does not", () => {
    const exact = "a".repeat(100);
    assert.deepEqual(lines(collect(new LineSplitter(100), [Buffer.from(`${exact}\n${exact}b\n`)])), [exact, "<101>"]);
  });
});

describe("decodeLine", () => {
  it("decodes a JSON object", () => {
    assert.deepEqual(decodeLine(Buffer.from('{"type":"ping","id":"p"}')), { ok: true, frame: { type: "ping", id: "p" } });
  });

  it("reports invalid UTF-8, non-JSON and non-object lines without throwing", () => {
    assert.equal((decodeLine(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])) as { reason: string }).reason, "invalid_utf8");
    assert.equal((decodeLine(Buffer.from("hello")) as { reason: string }).reason, "not_json");
    assert.equal((decodeLine(Buffer.from("42")) as { reason: string }).reason, "not_object");
    assert.equal((decodeLine(Buffer.from("[1,2]")) as { reason: string }).reason, "not_object");
    assert.equal((decodeLine(Buffer.from('{"id":')) as { reason: string }).reason, "not_json");
  });
});

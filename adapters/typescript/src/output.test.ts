import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentError } from "./errors.js";
import { Output } from "./output.js";

describe("Output", () => {
  it("holds a result with next actions and metadata", () => {
    const out = new Output({ n: 1 }, { nextActions: [{ agent: "a", action: "b" }], cost: 0.1, model: "m" });
    assert.equal(out.error, undefined);
    assert.deepEqual(out.metadata, { cost: 0.1, model: "m" });
    assert.equal(out.nextActions.length, 1);
  });

  it("makes a partial result from an AgentError", () => {
    const out = Output.partial([1], new AgentError("timeout", "half done"));
    assert.deepEqual(out.error, { code: "timeout", message: "half done" });
  });

  it("is recognised by Output.is, plain objects are not", () => {
    assert.ok(Output.is(new Output(null)));
    assert.ok(!Output.is({ result: 1 }));
    assert.ok(!Output.is(null));
  });
});

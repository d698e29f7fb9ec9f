import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentError } from "./errors.js";

describe("AgentError", () => {
  it("carries code, message, details, retryable and cause into the error body", () => {
    const cause = new Error("disk");
    const err = new AgentError("io_failed", "cannot read", { details: { path: "/x" }, retryable: true, cause });
    assert.equal(err.name, "AgentError");
    assert.equal(err.cause, cause);
    assert.deepEqual(err.toBody(), { code: "io_failed", message: "cannot read", data: { path: "/x" }, retryable: true });
  });

  it("leaves data and retryable out of the body when not set", () => {
    assert.deepEqual(new AgentError("invalid_params", "bad").toBody(), { code: "invalid_params", message: "bad" });
  });

  it("turns any other thrown error into internal with the stack as data.traceback", () => {
    const err = AgentError.from(new TypeError("boom"));
    assert.equal(err.code, "internal");
    assert.equal(err.message, "TypeError: boom");
    assert.match(String(err.details?.["traceback"]), /TypeError: boom\n\s+at /);
    assert.ok(err.cause instanceof TypeError);
  });

  it("turns thrown non-errors into internal", () => {
    assert.equal(AgentError.from("just a string").code, "internal");
    assert.match(AgentError.from({ a: 1 }).message, /\{"a":1\}/);
  });

  it("returns an AgentError as is and recognises one from another copy of the package", () => {
    const own = new AgentError("x", "y");
    assert.equal(AgentError.from(own), own);
    const foreign = Object.assign(new Error("m"), { name: "AgentError", code: "quota", retryable: true });
    const err = AgentError.from(foreign);
    assert.equal(err.code, "quota");
    assert.equal(err.retryable, true);
  });

  it("builds from a reply's error body", () => {
    const err = AgentError.fromBody({ code: "permission_denied", message: "no", data: { method: "net.fetch" } });
    assert.equal(err.code, "permission_denied");
    assert.deepEqual(err.details, { method: "net.fetch" });
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validate } from "./schema.js";

const schema = {
  type: "object",
  required: ["title"],
  properties: {
    title: { type: "string", minLength: 1 },
    level: { enum: ["low", "high"] },
    count: { type: "integer", minimum: 0 },
    items: { type: "array", items: { type: "object", required: ["id"] } },
  },
};

describe("validate", () => {
  it("accepts params that fit", () => {
    assert.deepEqual(validate(schema, { title: "t", level: "low", count: 2, items: [{ id: 1 }] }), []);
  });

  it("accepts anything without a schema", () => {
    assert.deepEqual(validate(undefined, 42), []);
  });

  it("names each problem with its path", () => {
    const problems = validate(schema, { level: "mid", count: -1.5, items: [{}] });
    assert.deepEqual(problems, [
      "params.title: is required",
      "params.level: must be one of [\"low\",\"high\"]",
      "params.count: expected integer, got number",
      "params.items[0].id: is required",
    ]);
  });

  it("checks the top-level type", () => {
    assert.deepEqual(validate(schema, [1]), ["params: expected object, got array"]);
  });
});

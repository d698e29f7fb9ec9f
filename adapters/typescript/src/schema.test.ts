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
    extra: { type: "object", additionalProperties: { type: "integer" } },
  },
};

describe("validate", () => {
  it("accepts params that fit", () => {
    assert.deepEqual(validate(schema, { title: "t", level: "low", count: 2, items: [{ id: 1 }] }), []);
  });

  it("accepts anything without a schema", () => {
    assert.deepEqual(validate(undefined, 42), []);
  });

  it("names each shape problem with its path", () => {
    const problems = validate(schema, { count: -1.5, extra: { n: "1" }, items: [{}] });
    assert.deepEqual(problems, [
      "params.title: is required",
      "params.count: expected integer, got number",
      "params.extra.n: expected integer, got string",
      "params.items[0].id: is required",
    ]);
  });

  it("leaves every keyword but type and required to the host", () => {
    const params = { title: "", level: "mid", count: -1 };
    const strict = {
      ...schema,
      additionalProperties: false,
      properties: { ...schema.properties, s: { anyOf: [{ type: "string" }], const: "x", maxLength: 1 } },
    };
    assert.deepEqual(validate(strict, { ...params, s: 7, other: true }), []);
  });

  it("checks the top-level type", () => {
    assert.deepEqual(validate(schema, [1]), ["params: expected object, got array"]);
  });
});

// The shape check of action params: the `type` keyword and `required`, through `properties`,
// `items` and `additionalProperties`. That is the params rule (docs/protocol.md): the host checks
// the whole schema (JSON Schema Draft 2020-12) before a task reaches the agent, and the adapters
// check only the shape, so a handler never sees the wrong JSON type and no SDK refuses what the
// host accepted. Every other keyword (enum, const, minimum, anyOf, oneOf, pattern ...) is the host's.
import type { JsonObject } from "./frames.js";

/** Returns the shape problems found (empty when the value has the schema's shape). */
export function validate(schema: JsonObject | undefined, value: unknown, path = "params"): string[] {
  if (schema === undefined) return [];
  const problems: string[] = [];
  const type = schema["type"];
  if (typeof type === "string" || Array.isArray(type)) {
    const types = (Array.isArray(type) ? type : [type]).filter((t): t is string => typeof t === "string");
    if (types.length > 0 && !types.some((t) => hasType(value, t))) {
      problems.push(`${path}: expected ${types.join(" or ")}, got ${typeName(value)}`);
      return problems;
    }
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const required = schema["required"];
    if (Array.isArray(required)) {
      for (const key of required) {
        if (typeof key === "string" && !Object.hasOwn(obj, key)) problems.push(`${path}.${key}: is required`);
      }
    }
    const properties = isSchema(schema["properties"]) ? schema["properties"] : {};
    const extra = schema["additionalProperties"];
    for (const key of Object.keys(obj)) {
      const sub = Object.hasOwn(properties, key) ? properties[key] : extra;
      if (isSchema(sub)) problems.push(...validate(sub, obj[key], `${path}.${key}`));
    }
  }
  if (Array.isArray(value) && isSchema(schema["items"])) {
    const items = schema["items"];
    value.forEach((item, i) => problems.push(...validate(items, item, `${path}[${i}]`)));
  }
  return problems;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "array":
      return Array.isArray(value);
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
    default:
      return true;
  }
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && Number.isInteger(value)) return "integer";
  return typeof value;
}

function isSchema(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

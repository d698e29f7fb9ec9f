// A small JSON Schema check for action params: type, required, properties, items, enum,
// minimum/maximum, minLength/maxLength. Enough to turn bad params into `invalid_params` before
// the handler runs; the full schema is still sent in hello for the host and clients.
import type { JsonObject } from "./frames.js";

/** Returns the problems found (empty when the value fits the schema). */
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
  const allowed = schema["enum"];
  if (Array.isArray(allowed) && !allowed.some((a) => JSON.stringify(a) === JSON.stringify(value))) {
    problems.push(`${path}: must be one of ${JSON.stringify(allowed)}`);
  }
  if (typeof value === "number") {
    const min = schema["minimum"];
    const max = schema["maximum"];
    if (typeof min === "number" && value < min) problems.push(`${path}: must be >= ${min}`);
    if (typeof max === "number" && value > max) problems.push(`${path}: must be <= ${max}`);
  }
  if (typeof value === "string") {
    const min = schema["minLength"];
    const max = schema["maxLength"];
    if (typeof min === "number" && value.length < min) problems.push(`${path}: must have at least ${min} characters`);
    if (typeof max === "number" && value.length > max) problems.push(`${path}: must have at most ${max} characters`);
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const required = schema["required"];
    if (Array.isArray(required)) {
      for (const key of required) {
        if (typeof key === "string" && !(key in obj)) problems.push(`${path}.${key}: is required`);
      }
    }
    const properties = schema["properties"];
    if (isSchemaMap(properties)) {
      for (const [key, sub] of Object.entries(properties)) {
        if (key in obj && isSchema(sub)) problems.push(...validate(sub, obj[key], `${path}.${key}`));
      }
      if (schema["additionalProperties"] === false) {
        for (const key of Object.keys(obj)) {
          if (!(key in properties)) problems.push(`${path}.${key}: is not allowed`);
        }
      }
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

function isSchemaMap(value: unknown): value is Record<string, JsonObject> {
  return isSchema(value);
}

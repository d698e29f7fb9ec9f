// A form generated from an action's params JSON schema: strings (enums as selects), numbers and
// integers, booleans, arrays (add/remove items), nested objects, required marks, and validation
// messages shown at their field before anything is sent. A schema it does not know (anyOf,
// untyped) gets a JSON text box, checked as JSON.
import { h } from "./dom.js";

type Schema = Record<string, unknown>;
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One field: its element, and a read that validates, marks errors and gives the value. */
export interface Field {
  element: HTMLElement;
  /** The value, `undefined` when left empty; errors shown on the field and counted in `errors`. */
  read(errors: string[]): Json | undefined;
}

let ids = 0;

function schemaType(schema: Schema): string {
  const type = schema.type;
  if (Array.isArray(type)) return String(type.find((t) => t !== "null") ?? "");
  if (typeof type === "string") return type;
  if (schema.properties) return "object";
  if (Array.isArray(schema.enum)) return "enum";
  return "";
}

function label(name: string, schema: Schema, required: boolean, id: string): HTMLElement {
  return h(
    "span",
    { class: "field-name", id: `${id}-label` },
    String(schema.title ?? name),
    required ? h("span", { class: "required", "aria-label": "required" }, " *") : null,
  );
}

function fieldShell(name: string, schema: Schema, required: boolean, control: HTMLElement, id: string) {
  const error = h("span", { class: "field-error", id: `${id}-error`, "aria-live": "polite" });
  control.setAttribute("aria-describedby", `${id}-help ${id}-error`);
  const element = h(
    "label",
    { class: "field", "data-field": name },
    label(name, schema, required, id),
    control,
    schema.description ? h("span", { class: "field-help", id: `${id}-help` }, String(schema.description)) : null,
    error,
  );
  const fail = (message: string, errors: string[]) => {
    element.classList.add("invalid");
    control.setAttribute("aria-invalid", "true");
    error.textContent = message;
    errors.push(`${name}: ${message}`);
  };
  const clear = () => {
    element.classList.remove("invalid");
    control.removeAttribute("aria-invalid");
    error.textContent = "";
  };
  return { element, fail, clear };
}

export function buildField(name: string, schema: Schema, required: boolean): Field {
  const id = `f${++ids}`;
  const type = schemaType(schema);
  if (type === "object") return objectField(name, schema, required, id);
  if (type === "array") return arrayField(name, schema, required, id);
  if (type === "boolean") {
    const input = h("input", { type: "checkbox", id, name, checked: schema.default === true });
    const shell = fieldShell(name, schema, false, input, id);
    return { element: shell.element, read: () => input.checked };
  }
  if (Array.isArray(schema.enum)) {
    const options = schema.enum as Json[];
    const select = h(
      "select",
      { id, name },
      h("option", { value: "" }, required ? "— choose —" : "(none)"),
      ...options.map((option, index) =>
        h("option", { value: String(index), selected: option === schema.default }, String(option)),
      ),
    );
    const shell = fieldShell(name, schema, required, select, id);
    return {
      element: shell.element,
      read(errors) {
        shell.clear();
        if (select.value === "") {
          if (required) shell.fail("choose one", errors);
          return undefined;
        }
        return options[Number(select.value)] ?? null;
      },
    };
  }
  if (type === "number" || type === "integer") {
    const input = h("input", {
      type: "number",
      id,
      name,
      step: type === "integer" ? "1" : "any",
      min: typeof schema.minimum === "number" ? schema.minimum : undefined,
      max: typeof schema.maximum === "number" ? schema.maximum : undefined,
      value: typeof schema.default === "number" ? schema.default : undefined,
      required,
    });
    const shell = fieldShell(name, schema, required, input, id);
    return {
      element: shell.element,
      read(errors) {
        shell.clear();
        const text = input.value.trim();
        if (!text) {
          if (input.validity.badInput) shell.fail("not a number", errors);
          else if (required) shell.fail("required", errors);
          return undefined;
        }
        const value = Number(text);
        if (!Number.isFinite(value)) return shell.fail("not a number", errors), undefined;
        if (type === "integer" && !Number.isInteger(value)) return shell.fail("a whole number", errors), undefined;
        if (typeof schema.minimum === "number" && value < schema.minimum)
          return shell.fail(`at least ${schema.minimum}`, errors), undefined;
        if (typeof schema.maximum === "number" && value > schema.maximum)
          return shell.fail(`at most ${schema.maximum}`, errors), undefined;
        return value;
      },
    };
  }
  if (type === "string") {
    const long = typeof schema.maxLength !== "number" || schema.maxLength > 200;
    const multiline = schema.format === "textarea" || (long && /text|content|body|prompt|yaml|code/i.test(name));
    const attrs = { id, name, required, value: typeof schema.default === "string" ? schema.default : undefined };
    const input = multiline ? h("textarea", attrs) : h("input", { ...attrs, type: "text", autocomplete: "off" });
    if (multiline && typeof schema.default === "string") input.textContent = schema.default;
    const shell = fieldShell(name, schema, required, input, id);
    return {
      element: shell.element,
      read(errors) {
        shell.clear();
        const value = input.value;
        if (!value) {
          if (required) shell.fail("required", errors);
          return undefined;
        }
        if (typeof schema.minLength === "number" && value.length < schema.minLength)
          return shell.fail(`at least ${schema.minLength} characters`, errors), undefined;
        if (typeof schema.maxLength === "number" && value.length > schema.maxLength)
          return shell.fail(`at most ${schema.maxLength} characters`, errors), undefined;
        if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(value))
          return shell.fail(`must match ${schema.pattern}`, errors), undefined;
        return value;
      },
    };
  }
  return jsonField(name, schema, required, id);
}

function objectField(name: string, schema: Schema, required: boolean, id: string): Field {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const needed = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  // Required fields first. The schema travels as a google.protobuf.Struct, whose keys keep no
  // order, so the order among the rest is the one they arrive in.
  const entries = Object.entries(properties).sort(([a], [b]) => Number(needed.has(b)) - Number(needed.has(a)));
  const fields = entries.map(([key, sub]) => [key, buildField(key, sub, needed.has(key))] as const);
  const element = name
    ? h("fieldset", { "data-field": name }, h("legend", {}, label(name, schema, required, id)), ...fields.map(([, f]) => f.element))
    : h("div", { class: "fields" }, ...fields.map(([, f]) => f.element));
  return {
    element,
    read(errors) {
      const value: Record<string, Json> = {};
      for (const [key, field] of fields) {
        const found = field.read(errors);
        if (found !== undefined) value[key] = found;
      }
      if (!Object.keys(value).length && !required && name) return undefined;
      return value;
    },
  };
}

function arrayField(name: string, schema: Schema, required: boolean, id: string): Field {
  const itemSchema = (schema.items ?? {}) as Schema;
  const items: { field: Field; row: HTMLElement }[] = [];
  const list = h("div", { class: "array-items" });
  const error = h("span", { class: "field-error", id: `${id}-error`, "aria-live": "polite" });
  const add = () => {
    const field = buildField(`${name}[${items.length}]`, itemSchema, true);
    const remove = h("button", { type: "button", "aria-label": `Remove item from ${name}` }, "Remove");
    const row = h("div", { class: "row" }, field.element, remove);
    const entry = { field, row };
    remove.addEventListener("click", () => {
      items.splice(items.indexOf(entry), 1);
      row.remove();
    });
    items.push(entry);
    list.appendChild(row);
  };
  const element = h(
    "fieldset",
    { "data-field": name },
    h("legend", {}, label(name, schema, required, id)),
    schema.description ? h("span", { class: "field-help" }, String(schema.description)) : null,
    list,
    h("button", { type: "button", onclick: add as EventListener }, `Add to ${name}`),
    error,
  );
  return {
    element,
    read(errors) {
      error.textContent = "";
      const values = items.map(({ field }) => field.read(errors)).filter((v) => v !== undefined) as Json[];
      const fail = (message: string) => {
        error.textContent = message;
        errors.push(`${name}: ${message}`);
      };
      if (!values.length && !required) return undefined;
      if (typeof schema.minItems === "number" && values.length < schema.minItems) fail(`at least ${schema.minItems} items`);
      if (typeof schema.maxItems === "number" && values.length > schema.maxItems) fail(`at most ${schema.maxItems} items`);
      return values;
    },
  };
}

function jsonField(name: string, schema: Schema, required: boolean, id: string): Field {
  const input = h("textarea", { id, name, placeholder: "JSON" });
  const shell = fieldShell(name, schema, required, input, id);
  return {
    element: shell.element,
    read(errors) {
      shell.clear();
      const text = input.value.trim();
      if (!text) {
        if (required) shell.fail("required", errors);
        return undefined;
      }
      try {
        return JSON.parse(text) as Json;
      } catch (error) {
        shell.fail(`not JSON: ${(error as Error).message}`, errors);
        return undefined;
      }
    },
  };
}

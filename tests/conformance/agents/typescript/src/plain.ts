// The seeds' plain-function style, with no SDK import: the runtime serves it as one action,
// `run`, that returns its payload unchanged:
//   node adapters/typescript/dist/runtime.js --module dist/plain.js
console.log("plain agent (typescript): loading");

export default function run(payload: unknown): unknown {
  return payload;
}

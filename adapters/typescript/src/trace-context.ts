// W3C trace context on the stdio link. A traced task frame carries the host span's
// `traceparent` (and `tracestate`); a call frame may carry one back, and the host parents the
// call's span on it. The SDK needs no OpenTelemetry: agent code that uses it reads
// `ctx.traceParent` and passes its own span's context as a call's `traceParent` option.

/** A traceparent and the tracestate that goes with it. */
export interface TraceContext {
  parent: string | undefined;
  state: string | undefined;
}

// W3C Trace Context level 1: version-traceid-spanid-flags, lowercase hex; a later version may
// append fields after a dash.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** `value` when it is a valid W3C traceparent (version not ff, ids not all zero), else undefined. */
export function validTraceParent(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const m = TRACEPARENT.exec(value);
  if (m === null) return undefined;
  const [, version, traceId, spanId, , rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId!) || /^0+$/.test(spanId!)) return undefined;
  return value;
}

/** A task frame's trace context; its tracestate only with a valid traceparent (W3C: without one it means nothing). */
export function taskTraceContext(frame: Record<string, unknown>): TraceContext {
  const parent = validTraceParent(frame["traceparent"]);
  const state = frame["tracestate"];
  return { parent, state: parent !== undefined && typeof state === "string" && state !== "" ? state : undefined };
}

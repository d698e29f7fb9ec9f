// Splits the byte stream of stdin into whole lines, with no limit beyond the max frame.

/** One unit the splitter yields. */
export type LineEvent =
  | { kind: "line"; line: Buffer }
  /** A line longer than the max frame: its first bytes (to recover an id) and its length. */
  | { kind: "oversized"; head: Buffer; size: number };

const NL = 0x0a;
const HEAD_BYTES = 256;

/**
 * Cuts chunks into `\n`-terminated lines (one trailing `\r` stripped). A line longer than
 * `maxFrame` is not buffered: its head is kept, the rest is discarded up to the next newline.
 */
export class LineSplitter {
  #maxFrame: number;
  #parts: Buffer[] = [];
  #size = 0;
  #discarding = false;
  #head: Buffer = Buffer.alloc(0);

  constructor(maxFrame: number) {
    this.#maxFrame = maxFrame;
  }

  /** Changes the limit (after `welcome` negotiates it). */
  set maxFrame(value: number) {
    this.#maxFrame = value;
  }

  get maxFrame(): number {
    return this.#maxFrame;
  }

  *push(chunk: Buffer): Generator<LineEvent> {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NL, start);
      const end = nl === -1 ? chunk.length : nl;
      this.#append(chunk.subarray(start, end));
      if (nl === -1) return;
      yield this.#finish();
      start = nl + 1;
    }
  }

  /** Flushes a last line without a newline at EOF. */
  *end(): Generator<LineEvent> {
    if (this.#size > 0 || this.#discarding) yield this.#finish();
  }

  #append(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.#discarding) {
      this.#size += piece.length;
      return;
    }
    if (this.#size + piece.length > this.#maxFrame + 1) {
      // +1 leaves room for a `\r` that is stripped later.
      const all = Buffer.concat([...this.#parts, piece]);
      this.#head = Buffer.from(all.subarray(0, HEAD_BYTES));
      this.#parts = [];
      this.#size += piece.length;
      this.#discarding = true;
      return;
    }
    // Copy: the chunk's memory may be reused by the stream.
    this.#parts.push(Buffer.from(piece));
    this.#size += piece.length;
  }

  #finish(): LineEvent {
    const size = this.#size;
    this.#size = 0;
    if (this.#discarding) {
      this.#discarding = false;
      const head = this.#head;
      this.#head = Buffer.alloc(0);
      return { kind: "oversized", head, size };
    }
    let line = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, size);
    this.#parts = [];
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, line.length - 1);
    if (line.length > this.#maxFrame) return { kind: "oversized", head: Buffer.from(line.subarray(0, HEAD_BYTES)), size };
    return { kind: "line", line };
  }
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** What a line decodes to. */
export type Decoded =
  | { ok: true; frame: Record<string, unknown> }
  | { ok: false; reason: "invalid_utf8" | "not_json" | "not_object"; sample: string };

/** Decodes one line: strict UTF-8, then JSON, which must be an object. */
export function decodeLine(line: Buffer): Decoded {
  let text: string;
  try {
    text = decoder.decode(line);
  } catch {
    return { ok: false, reason: "invalid_utf8", sample: sample(line.toString("utf8")) };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: "not_json", sample: sample(text) };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, reason: "not_object", sample: sample(text) };
  }
  return { ok: true, frame: value as Record<string, unknown> };
}

/** Recovers `"id":"..."` and `"type":"..."` from the start of a line too long to parse. */
export function recoverHead(head: Buffer): { id?: string; type?: string } {
  const text = head.toString("utf8");
  const out: { id?: string; type?: string } = {};
  const id = /"id"\s*:\s*"((?:[^"\\]|\\.){1,128})"/.exec(text);
  if (id?.[1] !== undefined) out.id = id[1];
  const type = /"type"\s*:\s*"([a-z_]{1,32})"/.exec(text);
  if (type?.[1] !== undefined) out.type = type[1];
  return out;
}

function sample(text: string): string {
  return text.length > 120 ? `${text.slice(0, 120)}...` : text;
}

import { write } from "node:fs";

/**
 * The one writer of the frame stream. Frames are queued as whole lines and written to a file
 * descriptor in order, one `fs.write` at a time (several queued frames may share one write).
 * Backpressure: the next write starts only when the previous one completed; a full
 * non-blocking pipe (EAGAIN) is retried after a pause. A closed pipe (EPIPE) drops the rest.
 */
export class FrameWriter {
  readonly fd: number;
  #queue: Buffer[] = [];
  #queued = 0;
  #writing = false;
  #closed = false;
  #idle: (() => void)[] = [];
  #onError: (err: NodeJS.ErrnoException) => void;

  /** Largest batch of queued frames written at once. */
  static readonly BATCH = 1 << 20;

  constructor(fd: number, onError: (err: NodeJS.ErrnoException) => void = () => {}) {
    this.fd = fd;
    this.#onError = onError;
  }

  /** Bytes waiting to be written. */
  get pending(): number {
    return this.#queued;
  }

  /** True once the reader of the stream went away. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Queues one frame: a line without its newline. */
  writeLine(line: string | Buffer): void {
    if (this.#closed) return;
    const buf = typeof line === "string" ? Buffer.from(`${line}\n`, "utf8") : Buffer.concat([line, NL]);
    this.#queue.push(buf);
    this.#queued += buf.length;
    if (!this.#writing) this.#next();
  }

  /** Resolves when every queued frame has been written (or the stream closed). */
  flush(): Promise<void> {
    if (!this.#writing && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #next(): void {
    if (this.#closed || this.#queue.length === 0) {
      this.#writing = false;
      this.#queue = [];
      this.#queued = 0;
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
      return;
    }
    this.#writing = true;
    let batch: Buffer;
    if (this.#queue.length === 1 || this.#queue[0]!.length >= FrameWriter.BATCH) {
      batch = this.#queue.shift()!;
    } else {
      const parts: Buffer[] = [];
      let size = 0;
      while (this.#queue.length > 0 && size + this.#queue[0]!.length <= FrameWriter.BATCH) {
        const part = this.#queue.shift()!;
        parts.push(part);
        size += part.length;
      }
      batch = Buffer.concat(parts, size);
    }
    this.#writeAll(batch, 0, 0);
  }

  #writeAll(buf: Buffer, offset: number, retries: number): void {
    write(this.fd, buf, offset, buf.length - offset, null, (err, written) => {
      if (err) {
        if (err.code === "EAGAIN" || err.code === "EWOULDBLOCK" || err.code === "EINTR") {
          // A non-blocking pipe is full: wait for the reader, with a capped backoff.
          setTimeout(() => this.#writeAll(buf, offset, retries + 1), Math.min(1 + retries, 20));
          return;
        }
        this.#closed = true;
        this.#onError(err);
        this.#next();
        return;
      }
      const at = offset + written;
      this.#queued -= written;
      if (at < buf.length) {
        this.#writeAll(buf, at, 0);
        return;
      }
      this.#next();
    });
  }
}

const NL = Buffer.from("\n");

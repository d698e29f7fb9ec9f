// Client and bidi streams (Attach, Converse, Pipe) over the host's WebSocket bridge at
// /rpc-ws/<service>/<method> (server/ether_host/transport/console_ws.py): the first frame is
// the call's metadata as JSON, then one binary frame per proto message each way; the host
// ends with a text frame holding the status ({} or {"error": {code, message, details}}).
import { fromBinary, toBinary, type DescMessage, type MessageShape, type MessageInitShape, create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { authMetadata } from "./api.js";

export interface BidiHandlers<O extends DescMessage> {
  message(message: MessageShape<O>): void;
  /** The call ended: undefined for OK, else the host's error (or the socket's). */
  end(error: ConnectError | undefined): void;
}

export interface BidiCall<I extends DescMessage> {
  send(message: MessageInitShape<I>): void;
  /** Half-close: no more requests. */
  end(): void;
  /** Cancel the call (closes the socket). */
  close(): void;
}

const CODES: Record<string, Code> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [name.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase(), value as Code]),
);

export function openBidi<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  handlers: BidiHandlers<O>,
): BidiCall<I> {
  const url = new URL(`/rpc-ws/${method}`, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  const pending: Uint8Array[] = [];
  let ended = false;
  let halfClosed = false;
  const finish = (error: ConnectError | undefined) => {
    if (ended) return;
    ended = true;
    handlers.end(error);
  };
  socket.addEventListener("open", () => {
    socket.send(JSON.stringify({ metadata: authMetadata() }));
    for (const frame of pending.splice(0)) socket.send(frame);
    if (halfClosed) socket.send(JSON.stringify({ end: true }));
  });
  socket.addEventListener("message", (event) => {
    if (event.data instanceof ArrayBuffer) {
      handlers.message(fromBinary(output, new Uint8Array(event.data)));
      return;
    }
    const status = JSON.parse(String(event.data)) as { error?: { code: string; message: string } };
    if (status.error) {
      finish(new ConnectError(status.error.message, CODES[status.error.code] ?? Code.Unknown));
    } else {
      finish(undefined);
    }
  });
  socket.addEventListener("close", (event) => {
    if (!ended) {
      finish(new ConnectError(`the connection to the host closed (${event.code}${event.reason ? `: ${event.reason}` : ""})`, Code.Unavailable));
    }
  });
  return {
    send(message) {
      const frame = toBinary(input, create(input, message));
      if (socket.readyState === WebSocket.OPEN) socket.send(frame);
      else pending.push(frame);
    },
    end() {
      halfClosed = true;
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ end: true }));
    },
    close() {
      ended = true;
      socket.close();
    },
  };
}

/** A bidi call whose responses are read as a stream (for followLive): ``messages`` yields each
 * response and ends when the host ends the call, throwing its error if it failed (the socket's
 * loss is UNAVAILABLE, which followLive retries). Aborting ``signal`` closes the socket. */
export function openBidiStream<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  signal: AbortSignal,
): { call: BidiCall<I>; messages: AsyncIterable<MessageShape<O>> } {
  const queue: MessageShape<O>[] = [];
  let done = false;
  let failure: ConnectError | undefined;
  let wake: (() => void) | null = null;
  const call = openBidi(method, input, output, {
    message(message) {
      queue.push(message);
      wake?.();
    },
    end(error) {
      done = true;
      failure = error;
      wake?.();
    },
  });
  const stop = () => {
    call.close(); // ends the call without an end() callback: wake the reader here
    done = true;
    wake?.();
  };
  signal.addEventListener("abort", stop);
  async function* messages(): AsyncGenerator<MessageShape<O>> {
    try {
      for (;;) {
        while (queue.length) yield queue.shift() as MessageShape<O>;
        if (done) break;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
      }
      if (failure) throw failure;
    } finally {
      signal.removeEventListener("abort", stop);
      call.close();
    }
  }
  return { call, messages: messages() };
}

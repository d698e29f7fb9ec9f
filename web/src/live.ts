// A server stream a page follows for as long as it is open (WatchEvents, StreamLogs,
// StreamRunEvents): when it breaks (the host restarted, the connection dropped) the page says so
// and opens it again, backing off from 1 s to 10 s as the terminal's Attach does, and catches up
// from what it has already shown (each page knows how: re-read the list, ask from the last
// sequence, skip log lines already shown).
import { Code, ConnectError } from "@connectrpc/connect";

// Refusals that another try would only repeat: the page shows them and stops following.
const FINAL = new Set([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unimplemented,
  Code.Unauthenticated,
]);

/** A refusal another try would only repeat (not a broken connection or a host going away). */
export function isFinal(error: unknown): boolean {
  return FINAL.has(ConnectError.from(error).code);
}

export interface Following<T> {
  signal: AbortSignal;
  /** Before each (re)opening: catch up (re-read what the stream does not replay). True: the
   * page has everything already (a run that ended), nothing to follow. */
  catchUp?: () => Promise<boolean | void>;
  /** The stream, opened afresh from what the page has shown so far. */
  open: () => AsyncIterable<T>;
  /** One item; true: the page has all it wants (the run ended), stop following. */
  each: (item: T) => Promise<boolean | void> | boolean | void;
  /** The stream is open (again) and caught up. */
  live: () => void;
  /** The stream broke; the page tries again after a pause (attempt 1, 2, ...). */
  lost: (attempt: number) => void;
}

/** Follow until the page leaves, the stream's job is done, or the host refuses the call for good
 * (thrown, for the page to show). */
export async function followLive<T>(following: Following<T>): Promise<void> {
  const { signal } = following;
  let attempt = 0;
  while (!signal.aborted) {
    try {
      if ((await following.catchUp?.()) === true) return;
      following.live();
      attempt = 0;
      for await (const item of following.open()) {
        if ((await following.each(item)) === true) return;
      }
      // Ended by the host without an error (it was shutting down): open it again.
    } catch (error) {
      if (signal.aborted) return;
      if (isFinal(error)) throw error;
    }
    if (signal.aborted) return;
    attempt += 1;
    following.lost(attempt);
    await pause(Math.min(500 * 2 ** attempt, 10_000), signal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

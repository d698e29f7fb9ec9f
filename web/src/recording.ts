// A terminal's asciicast v2 recording (TerminalService.SetRecording / GetRecording): its state,
// the whole cast downloaded piece by piece, and the cast parsed for playback.
import { terminals, type Recording } from "./api.js";

const PIECE = 1024 * 1024; // GetRecording's largest piece
// An offset past any cast: GetRecording answers no bytes, only the recording's state.
const PAST_THE_END = BigInt(Number.MAX_SAFE_INTEGER);

export async function recordingState(id: string, signal: AbortSignal): Promise<Recording | undefined> {
  const answer = await terminals.getRecording({ terminalId: id, offset: PAST_THE_END, maxBytes: 1 }, { signal });
  return answer.recording;
}

/** The whole cast as it is now: pieces until one comes back empty. */
export async function downloadCast(id: string, signal: AbortSignal): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let offset = 0n;
  for (;;) {
    const answer = await terminals.getRecording({ terminalId: id, offset, maxBytes: PIECE }, { signal });
    if (answer.data.length === 0) break;
    pieces.push(answer.data);
    offset += BigInt(answer.data.length);
  }
  const cast = new Uint8Array(Number(offset));
  let at = 0;
  for (const piece of pieces) {
    cast.set(piece, at);
    at += piece.length;
  }
  return cast;
}

/** Hand ``cast`` to the browser as a file download named ``name``. */
export function saveFile(cast: Uint8Array, name: string): void {
  const url = URL.createObjectURL(new Blob([cast as BlobPart], { type: "application/x-asciicast" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export interface CastHeader {
  version: number;
  width: number;
  height: number;
}

/** [seconds, "o" | "r", text]: output, or a resize as "COLSxROWS". */
export type CastEvent = [number, string, string];

/** The header and events of an asciicast v2 file; a line that is not one is an error. */
export function parseCast(cast: Uint8Array): { header: CastHeader; events: CastEvent[] } {
  const lines = new TextDecoder().decode(cast).split("\n").filter((line) => line.length > 0);
  const header = JSON.parse(lines[0] ?? "{}") as CastHeader;
  if (header.version !== 2) throw new Error(`not an asciicast v2 file (version ${String(header.version)})`);
  const events = lines.slice(1).map((line, index) => {
    const event = JSON.parse(line) as unknown;
    if (!Array.isArray(event) || event.length !== 3 || typeof event[0] !== "number") {
      throw new Error(`line ${index + 2} of the cast is not an event`);
    }
    return event as CastEvent;
  });
  return { header, events };
}

export function describeRecording(recording: Recording | undefined): string {
  if (!recording) return "Not recorded";
  const size = `${(Number(recording.size) / 1024).toFixed(1)} KiB`;
  if (recording.active) return `Recording · ${size}`;
  const why: Record<string, string> = {
    stopped: "stopped",
    size_limit: `stopped at the size limit (${(Number(recording.limit) / 1048576).toFixed(0)} MiB)`,
    exited: "ended with the program",
    write_failed: "stopped: the host could not write it",
  };
  return `Recorded · ${size} · ${why[recording.stoppedReason] ?? recording.stoppedReason}`;
}

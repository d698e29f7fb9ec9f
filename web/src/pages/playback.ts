// A terminal's recording played back in xterm.js (#/terminals/ID/playback): the cast is
// downloaded through GetRecording and its events written with their timing, resizes included.
// Why not asciinema-player: it brings its own terminal emulator and framework into the bundle,
// while the console already has xterm.js; replaying a v2 cast is writing its events on time.
import { ConnectError } from "@connectrpc/connect";
import { Terminal as Xterm } from "@xterm/xterm";
import { errorText, isCancel } from "../api.js";
import { h, setText, show } from "../dom.js";
import { downloadCast, parseCast, type CastEvent } from "../recording.js";
import type { Page } from "../router.js";

const IDLE_CAP = 2; // seconds: a longer pause in the recording plays as this long

export const playbackPage: Page = (main, signal, id = "") => {
  const status = h("p", { class: "muted", role: "status", id: "playback-status" }, "Loading the recording…");
  const box = h("div", { class: "terminal-box", id: "playback", style: "height: auto" });
  const replay = h("button", { type: "button", id: "replay", disabled: true }, "Replay");
  const speed = h(
    "select",
    { id: "speed", "aria-label": "Speed" },
    ...[1, 2, 5, 20].map((value) => h("option", { value }, `${value}×`)),
  );
  show(
    main,
    h("p", {}, h("a", { href: `#/terminals/${encodeURIComponent(id)}` }, "← Terminal")),
    h("h1", {}, `Recording of ${id}`),
    status,
    h("p", { class: "row" }, replay, h("label", {}, "Speed ", speed)),
    box,
  );
  let term: Xterm | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // For tests: the player's xterm.js and whether it has written every event.
  const progress = { done: false, events: 0, written: 0 };
  Object.assign(window, { etherPlayback: progress });

  const play = (events: CastEvent[], width: number, height: number) => {
    if (!term) return;
    clearTimeout(timer);
    term.reset();
    term.resize(width, height);
    Object.assign(progress, { done: false, events: events.length, written: 0 });
    // Play times: the recording's, with long pauses shortened to IDLE_CAP.
    const at: number[] = [];
    let previous = 0;
    let shifted = 0;
    for (const [time] of events) {
      shifted += Math.min(Math.max(0, time - previous), IDLE_CAP);
      previous = time;
      at.push(shifted);
    }
    const rate = Number(speed.value) || 1;
    const started = performance.now();
    let next = 0;
    const tick = () => {
      const now = ((performance.now() - started) / 1000) * rate;
      while (next < events.length && (at[next] ?? 0) <= now) {
        const [, kind, data] = events[next] as CastEvent;
        if (kind === "o") term?.write(data);
        else if (kind === "r") {
          const [cols, rows] = data.split("x").map(Number);
          if (cols && rows) term?.resize(cols, rows);
        }
        next += 1;
      }
      progress.written = next;
      if (next < events.length) {
        timer = setTimeout(tick, Math.max(0, (((at[next] ?? 0) - now) * 1000) / rate));
      } else {
        progress.done = true;
        setText(status, `Played ${events.length} events (${(at.at(-1) ?? 0).toFixed(1)} s)`);
      }
    };
    setText(status, "Playing…");
    tick();
  };

  void (async () => {
    try {
      const { header, events } = parseCast(await downloadCast(id, signal));
      if (signal.aborted) return;
      term = new Xterm({
        cols: header.width,
        rows: header.height,
        disableStdin: true,
        fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
        fontSize: 14,
        scrollback: 5000,
      });
      term.open(box);
      Object.assign(window, { etherTerminal: term });
      const start = () => play(events, header.width, header.height);
      replay.disabled = false;
      replay.addEventListener("click", start);
      speed.addEventListener("change", start);
      start();
    } catch (error) {
      if (isCancel(error)) return;
      status.className = "error";
      const unreadable = !(error instanceof ConnectError) && error instanceof Error;
      setText(status, unreadable ? `The recording could not be read: ${error.message}` : errorText(error));
    }
  })();
  signal.addEventListener("abort", () => {
    clearTimeout(timer);
    term?.dispose();
  });
};

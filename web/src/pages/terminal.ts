// One terminal in xterm.js, attached live through Attach over the WebSocket bridge: typing,
// pasting and resizing with the window; read-only for a caller without the write right (the
// host decides and says so in `started`) or when asked (#/terminals/ID?read_only=1); several
// viewers at once; a dropped connection reconnects from the last offset it showed.
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as Xterm } from "@xterm/xterm";
import { Code, ConnectError } from "@connectrpc/connect";
import { AttachRequestSchema, AttachResponseSchema, errorText, isCancel, terminals } from "../api.js";
import { openBidi, type BidiCall } from "../bridge.js";
import { h, setText, show } from "../dom.js";
import { describeRecording, downloadCast, recordingState, saveFile } from "../recording.js";
import { hashQuery, type Page } from "../router.js";

export const terminalPage: Page = (main, signal, id = "") => {
  const askedReadOnly = hashQuery().get("read_only") === "1";
  const state = h("p", { class: "muted", role: "status", id: "terminal-status" }, "Attaching…");
  const box = h("div", { class: "terminal-box", id: "terminal" });
  const recordingBar = recordingControls(id, signal, askedReadOnly);
  show(
    main,
    h("p", {}, h("a", { href: "#/terminals" }, "← Terminals")),
    h("h1", {}, `Terminal ${id}`),
    state,
    recordingBar,
    box,
    h(
      "p",
      { class: "row" },
      h("a", { href: `#/terminals/${encodeURIComponent(id)}${askedReadOnly ? "" : "?read_only=1"}` }, askedReadOnly ? "Open writable" : "Open read-only"),
    ),
  );
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  const term = new Xterm({
    cursorBlink: !askedReadOnly,
    disableStdin: askedReadOnly,
    convertEol: false,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
    fontSize: 14,
    // xterm.js's own default (and VS Code's terminal's): a flood's every line scrolls the whole
    // ring (a line's cells recycled per line), and the larger the ring the less of it fits the
    // CPU's caches: the console bench's flood reached the page at 26.6-27.2 MiB/s with 1000
    // lines against 24.3-25.0 with 2000 (three interleaved pairs), and 5000 parsed ~35 % slower
    // than 2000 (bench/RESULTS.md "Web console"). The host keeps the terminal's own output and
    // screen; the page's scrollback is only what this view shows.
    scrollback: 1000,
    theme: dark ? undefined : { background: "#000000" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  // For tests, the benchmark and the curious: the xterm.js instance and the bytes it was given.
  const stats = { bytes: 0, lastAt: 0 };
  Object.assign(window, { etherTerminal: term, etherTerminalStats: stats });
  const encoder = new TextEncoder();
  let call: BidiCall<typeof AttachRequestSchema> | null = null;
  let readOnly = askedReadOnly;
  let offset: bigint | undefined;
  let retry = 0;
  let stopped = false;

  const sendSize = () => {
    if (!call || readOnly) return;
    call.send({ kind: { case: "resize", value: { rows: term.rows, cols: term.cols } } });
  };
  const onResize = () => {
    fit.fit();
    sendSize();
  };
  window.addEventListener("resize", onResize);
  const typing = term.onData((data) => {
    if (!readOnly) call?.send({ kind: { case: "input", value: { input: { case: "data", value: encoder.encode(data) } } } });
  });

  const attach = () => {
    call = openBidi("ether.v1.TerminalService/Attach", AttachRequestSchema, AttachResponseSchema, {
      message(message) {
        const kind = message.kind;
        if (kind.case === "started") {
          retry = 0;
          readOnly = kind.value.readOnly;
          term.options.disableStdin = readOnly;
          box.dataset.attached = "true";
          box.dataset.readOnly = String(readOnly);
          setText(state, `${readOnly ? "Attached read-only" : "Attached"} · ${kind.value.terminal?.argv.join(" ") ?? ""}${kind.value.resumed ? " · resumed" : ""}`);
          sendSize();
          if (!readOnly) term.focus();
        } else if (kind.case === "snapshot") {
          // ESC c (a full reset) goes through xterm.js's write queue, after output still
          // waiting in it; term.reset() would run at once and that output land on the snapshot.
          term.write("\x1bc");
          const screen = kind.value.screen;
          term.write((screen?.lines ?? []).join("\r\n"));
          if (screen?.cursor) term.write(`\x1b[${screen.cursor.row + 1};${screen.cursor.col + 1}H`);
          offset = kind.value.offset;
        } else if (kind.case === "output") {
          term.write(kind.value.data);
          stats.bytes += kind.value.data.length;
          stats.lastAt = performance.now();
          offset = kind.value.offset + BigInt(kind.value.data.length);
        } else if (kind.case === "exit") {
          const exit = kind.value.exitStatus;
          setText(state, `The program ended${exit ? ` (${exit.signal ? `signal ${exit.signal}` : `exit ${exit.code}`})` : ""}`);
          stopped = true;
        } else if (kind.case === "lagged") {
          term.write(`\r\n\x1b[33m[${kind.value.droppedTo - kind.value.droppedFrom} bytes of output skipped: this viewer fell behind]\x1b[0m\r\n`);
        }
      },
      end(error) {
        call = null;
        if (stopped || signal.aborted) return;
        if (error && error.code !== Code.Unavailable) {
          state.className = "error";
          setText(state, errorText(error));
          return;
        }
        // The connection dropped: come back from the last offset shown (output the host still
        // holds is replayed, else it sends a fresh snapshot).
        retry += 1;
        setText(state, `Connection lost; reconnecting (attempt ${retry})…`);
        setTimeout(() => !signal.aborted && attach(), Math.min(500 * 2 ** retry, 10_000));
      },
    });
    call.send({
      kind: {
        case: "start",
        value: { terminalId: id, readOnly: askedReadOnly, ...(offset === undefined ? {} : { fromOffset: offset }) },
      },
    });
  };
  attach();
  signal.addEventListener("abort", () => {
    stopped = true;
    call?.close();
    typing.dispose();
    window.removeEventListener("resize", onResize);
    term.dispose();
  });
};

/** Start or stop recording the terminal (asciicast v2), download the .cast, play it back. */
function recordingControls(id: string, signal: AbortSignal, readOnly: boolean): HTMLElement {
  const status = h("span", { class: "muted", role: "status", id: "recording-status" }, "");
  const toggle = h("button", { type: "button", id: "record", hidden: readOnly }, "Start recording");
  const download = h("button", { type: "button", id: "download-cast", disabled: true }, "Download .cast");
  const playback = h("a", { href: `#/terminals/${encodeURIComponent(id)}/playback`, id: "playback-link", hidden: true }, "Play back");
  let active = false;
  const showState = async () => {
    try {
      const recording = await recordingState(id, signal);
      active = recording?.active ?? false;
      setText(status, describeRecording(recording));
      setText(toggle, active ? "Stop recording" : "Start recording");
      download.disabled = false;
      playback.hidden = false;
    } catch (error) {
      if (isCancel(error)) return;
      // FAILED_PRECONDITION (NO_RECORDING): never recorded, which is no error to show.
      const never = ConnectError.from(error).code === Code.FailedPrecondition;
      setText(status, never ? "Not recorded" : errorText(error));
      download.disabled = true;
      playback.hidden = true;
    }
  };
  toggle.addEventListener("click", async () => {
    try {
      await terminals.setRecording({ terminalId: id, record: !active }, { signal });
      await showState();
    } catch (error) {
      if (!isCancel(error)) setText(status, errorText(error));
    }
  });
  download.addEventListener("click", async () => {
    try {
      saveFile(await downloadCast(id, signal), `${id}.cast`);
      await showState();
    } catch (error) {
      if (!isCancel(error)) setText(status, errorText(error));
    }
  });
  void showState();
  return h("p", { class: "row", "aria-label": "Recording" }, status, toggle, download, playback);
}

// A session: chat with its gateway agent through Converse (the WebSocket bridge), the session's
// context shown live as it changes (WatchContext).
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConverseRequestSchema, ConverseResponseSchema, errorText, gateway, isCancel, type ConverseResponse } from "../api.js";
import { openBidiStream, type BidiCall } from "../bridge.js";
import { h, setText, show } from "../dom.js";
import { pretty } from "../format.js";
import { followLive } from "../live.js";
import type { Page } from "../router.js";

export const sessionPage: Page = (main, signal, sessionId = "") => {
  const state = h("p", { class: "muted", role: "status", id: "chat-status" }, "Connecting…");
  const log = h("ol", { class: "chat", id: "chat", "aria-label": "Conversation", "aria-live": "polite" });
  const text = h("textarea", { id: "message", name: "message", rows: 3, placeholder: "Write a message; Enter sends, Shift+Enter breaks the line" });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const form = h("form", { class: "chat-form", "aria-label": "Message" }, text, h("div", { class: "row" }, send));
  const context = h("pre", { id: "context", "aria-label": "Session context", tabindex: "0" }, "{}");
  const contextVersion = h("p", { class: "muted", id: "context-version" });
  show(
    main,
    h("p", {}, h("a", { href: "#/sessions" }, "← Sessions")),
    h("h1", {}, `Session ${sessionId}`),
    state,
    h("div", { class: "chat-layout" }, h("section", { "aria-label": "Chat" }, log, form), h("section", { "aria-label": "Context" }, h("h2", {}, "Context (live)"), contextVersion, context)),
  );
  const say = (who: string, body: string, kind = "") => {
    log.appendChild(h("li", { class: `chat-${who} ${kind}` }, h("span", { class: "chat-who" }, who), h("span", { class: "chat-text" }, body)));
    log.lastElementChild?.scrollIntoView({ block: "nearest" });
  };
  // Converse for as long as the page is open. Broken (the host restarted), it is opened again
  // with after_sequence = the last event shown: the host replays what happened meanwhile (a turn
  // the restart cut short ends with its `host_restarted` error), so nothing is missed or shown
  // twice (docs/gateway.md, "What survives a restart"). Messages sent whose `accepted` had not
  // come are sent again with the same client_message_id: the session runs each id once.
  let call: BidiCall<typeof ConverseRequestSchema> | null = null;
  let counter = 0;
  let lastSequence = 0n;
  const unaccepted = new Map<string, string>(); // client_message_id -> text
  send.disabled = true;
  const onEvent = (response: ConverseResponse): boolean => {
    if (response.sequence <= lastSequence) return false;
    lastSequence = response.sequence;
    log.dataset.sequence = String(lastSequence);
    const event = response.event;
    if (event.case === "reply") {
      const data = event.value.data ? toJson(ValueSchema, event.value.data) : null;
      say(event.value.agent || "agent", event.value.text || pretty(data), event.value.partial ? "partial" : "");
    } else if (event.case === "accepted") {
      unaccepted.delete(event.value.clientMessageId);
      setText(state, event.value.queuedAhead ? `Queued behind ${event.value.queuedAhead} turns…` : "Thinking…");
    } else if (event.case === "progress") {
      setText(state, event.value.message || event.value.step);
    } else if (event.case === "error") {
      say("error", `${event.value.error?.message ?? "the turn failed"} (${event.value.error?.code ?? ""})`, "error");
    } else if (event.case === "turnCompleted") {
      setText(state, "Ready");
      log.dataset.turns = String(response.turn);
    } else if (event.case === "sessionClosed") {
      setText(state, `The session is closed: ${event.value.reason}`);
      send.disabled = true;
      return true;
    }
    return false;
  };
  followLive({
    signal,
    open: () => {
      const opened = openBidiStream("ether.v1.GatewayService/Converse", ConverseRequestSchema, ConverseResponseSchema, signal);
      call = opened.call;
      call.send({ kind: { case: "start", value: { sessionId, afterSequence: lastSequence } } });
      for (const [id, message] of unaccepted) call.send({ kind: { case: "message", value: { text: message, clientMessageId: id } } });
      return opened.messages;
    },
    each: onEvent,
    live: () => {
      state.className = "muted";
      state.dataset.live = "true";
      send.disabled = false;
      setText(state, "Ready");
    },
    lost: (attempt) => {
      call = null;
      state.dataset.live = "false";
      send.disabled = true;
      setText(state, `Connection lost; reconnecting (attempt ${attempt})…`);
    },
  })
    .then(() => {
      if (signal.aborted || send.disabled) return;
      send.disabled = true;
      setText(state, "The conversation ended.");
    })
    .catch((error: unknown) => {
      if (isCancel(error) || signal.aborted) return;
      send.disabled = true;
      state.className = "error";
      delete state.dataset.live;
      setText(state, errorText(error));
    });
  const submit = () => {
    const message = text.value.trim();
    if (!message || !call || send.disabled) return;
    say("you", message);
    const id = `console-${Date.now()}-${++counter}`;
    unaccepted.set(id, message);
    call.send({ kind: { case: "message", value: { text: message, clientMessageId: id } } });
    text.value = "";
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  // The context: read, then followed from its version (WatchContext after_version). Broken, it
  // is read again and followed from the version read: what changed meanwhile shows.
  let current: Record<string, unknown> = {};
  let version = 0n;
  followLive({
    signal,
    catchUp: async () => {
      const read = await gateway.getContext({ sessionId }, { signal });
      current = (read.context ?? {}) as Record<string, unknown>;
      version = read.version;
      setText(context, pretty(current));
      setText(contextVersion, `version ${version}`);
    },
    open: () => gateway.watchContext({ sessionId, afterVersion: version }, { signal }),
    each: (item) => {
      const event = item.event;
      if (event.case === "snapshot") {
        current = (event.value.context ?? {}) as Record<string, unknown>;
        version = event.value.version;
        setText(context, pretty(current));
        setText(contextVersion, `version ${version}`);
      } else if (event.case === "change") {
        if (event.value.version <= version) return;
        const values = (event.value.values ?? {}) as Record<string, unknown>;
        for (const key of event.value.keys) {
          if (key in values) current[key] = values[key];
          else delete current[key];
        }
        version = event.value.version;
        setText(context, pretty(current));
        setText(contextVersion, `version ${version}${event.value.author ? ` · by ${event.value.author}` : ""}`);
      } else if (event.case === "sessionClosed") {
        return true;
      }
      return false;
    },
    live: () => {
      contextVersion.dataset.live = "true";
    },
    lost: (attempt) => {
      contextVersion.dataset.live = "false";
      setText(contextVersion, `version ${version} · connection lost; reconnecting (attempt ${attempt})…`);
    },
  }).catch((error: unknown) => {
    if (isCancel(error)) return;
    delete contextVersion.dataset.live;
    setText(contextVersion, errorText(error));
  });
  text.focus();
};

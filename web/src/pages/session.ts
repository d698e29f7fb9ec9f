// A session: chat with its gateway agent through Converse (the WebSocket bridge), the session's
// context shown live as it changes (WatchContext).
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConverseRequestSchema, ConverseResponseSchema, errorText, gateway, isCancel } from "../api.js";
import { openBidi, type BidiCall } from "../bridge.js";
import { h, setText, show } from "../dom.js";
import { pretty } from "../format.js";
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
  let call: BidiCall<typeof ConverseRequestSchema> | null = null;
  let counter = 0;
  call = openBidi("ether.v1.GatewayService/Converse", ConverseRequestSchema, ConverseResponseSchema, {
    message(response) {
      const event = response.event;
      if (event.case === "reply") {
        const data = event.value.data ? toJson(ValueSchema, event.value.data) : null;
        say(event.value.agent || "agent", event.value.text || pretty(data), event.value.partial ? "partial" : "");
      } else if (event.case === "accepted") {
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
      }
    },
    end(error) {
      call = null;
      if (signal.aborted) return;
      send.disabled = true;
      state.className = error ? "error" : "muted";
      setText(state, error ? errorText(error) : "The conversation ended.");
    },
  });
  call.send({ kind: { case: "start", value: { sessionId, afterSequence: 0n } } });
  setText(state, "Ready");
  const submit = () => {
    const message = text.value.trim();
    if (!message || !call) return;
    say("you", message);
    call.send({ kind: { case: "message", value: { text: message, clientMessageId: `console-${Date.now()}-${++counter}` } } });
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
  signal.addEventListener("abort", () => call?.close());
  (async () => {
    try {
      for await (const item of gateway.watchContext({ sessionId }, { signal })) {
        const event = item.event;
        if (event.case === "snapshot") {
          setText(context, pretty(event.value.context ?? {}));
          setText(contextVersion, `version ${event.value.version}`);
        } else if (event.case === "change") {
          const current = JSON.parse(context.textContent || "{}") as Record<string, unknown>;
          for (const key of event.value.keys) {
            const values = (event.value.values ?? {}) as Record<string, unknown>;
            if (key in values) current[key] = values[key];
            else delete current[key];
          }
          setText(context, pretty(current));
          setText(contextVersion, `version ${event.value.version}${event.value.author ? ` · by ${event.value.author}` : ""}`);
        }
      }
    } catch (error) {
      if (!isCancel(error)) setText(contextVersion, errorText(error));
    }
  })();
  text.focus();
};

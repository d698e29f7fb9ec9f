// Sign in with a token (one line of the host's token file). The token is kept for this tab
// only (sessionStorage) and sent as `authorization: Bearer TOKEN`, as gRPC clients send it.
import { errorText, setToken, supervisor } from "../api.js";
import { h, setText, show } from "../dom.js";
import { go, hashQuery, type Page } from "../router.js";

export const signInPage: Page = (main, signal) => {
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", required: true });
  const problem = h("p", { class: "error", role: "alert", id: "sign-in-error" });
  const reason = hashQuery().get("reason");
  const form = h(
    "form",
    { class: "schema signin", "aria-label": "Sign in" },
    h("p", {}, "This host asks for a token. It is kept for this browser tab only."),
    reason ? h("p", { class: "muted" }, reason) : null,
    h("label", {}, h("span", { class: "field-name" }, "Token"), input),
    problem,
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Sign in")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    setText(problem, "");
    setToken(input.value.trim());
    try {
      await supervisor.getHostInfo({}, { signal });
      go(hashQuery().get("next") || "#/agents");
    } catch (error) {
      setToken("");
      setText(problem, errorText(error));
      input.focus();
    }
  });
  show(main, h("h1", {}, "Sign in"), form);
  input.focus();
};

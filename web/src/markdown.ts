// A run's Markdown report as HTML, with marked. The report quotes agents' output, so raw HTML
// in it is shown as text and only http(s), mailto and in-page links are kept.
import { marked } from "marked";

const escape = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

marked.use({ renderer: { html: ({ text }) => escape(text) } });

export function renderMarkdown(markdown: string): DocumentFragment {
  const template = document.createElement("template");
  template.innerHTML = marked.parse(markdown, { async: false });
  for (const element of template.content.querySelectorAll("[href], [src]")) {
    for (const name of ["href", "src"]) {
      const value = element.getAttribute(name);
      if (value !== null && !/^(https?:|mailto:|#|\/(?!\/))/i.test(value.trim())) element.removeAttribute(name);
    }
  }
  return template.content;
}

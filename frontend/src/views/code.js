// Code on the page: highlighted CUDA, unified diffs with added/removed lines coloured,
// and the kernel editor (a textarea over its own highlighted copy).
import { highlightCuda } from "../transforms/cuda.js";
import { diffStats, parseUnifiedDiff } from "../transforms/diff.js";
import { lineRange } from "../transforms/preflight.js";
import { h } from "./dom.js";

/** @param {string} source */
export function codeBlock(source) {
  const lines = source.replace(/\n$/, "").split("\n").length;
  const numbers = Array.from({ length: lines }, (_, i) => i + 1).join("\n");
  return h("div", { class: "code-block" },
    h("pre", { class: "line-numbers", "aria-hidden": "true" }, numbers),
    h("pre", { class: "code" }, h("code", { html: highlightCuda(source) })));
}

/** @param {string} diffText */
/**
 * An excerpt of a source from line `firstLine`, the `marked` lines flagged in the gutter
 * (a skill card's anchor in the code it came from).
 * @param {string} text @param {number} firstLine @param {number[]} marked
 */
export function excerptBlock(text, firstLine, marked) {
  const count = text.replace(/\n$/, "").split("\n").length;
  const flagged = new Set(marked);
  const numbers = Array.from({ length: count }, (_, i) => firstLine + i)
    .map((n) => flagged.has(n) ? h("mark", { class: "anchor-line" }, `▶${n}`) : String(n));
  return h("div", { class: "code-block excerpt" },
    h("pre", { class: "line-numbers", "aria-hidden": "true" }, numbers.flatMap((n, i) => (i ? ["\n", n] : [n]))),
    h("pre", { class: "code" }, h("code", { html: highlightCuda(text) })));
}

export function diffBlock(diffText) {
  const lines = parseUnifiedDiff(diffText);
  if (lines.length === 0) return h("p", { class: "muted" }, "No change.");
  const { added, removed } = diffStats(lines);
  const sign = { add: "+", del: "-", ctx: " ", hunk: "", file: "", meta: "" };
  return h("div", { class: "diff" },
    h("p", { class: "diff-stats" }, h("span", { class: "added" }, `+${added}`), " ", h("span", { class: "removed" }, `−${removed}`)),
    h("pre", null, lines.map((line) => {
      const body = line.kind === "add" || line.kind === "del" || line.kind === "ctx" ? highlightCuda(line.text) : escape(line.text);
      return h("span", { class: `diff-line diff-${line.kind}` },
        h("span", { class: "ln" }, line.oldLine ?? ""), h("span", { class: "ln" }, line.newLine ?? ""),
        h("span", { class: "sign" }, sign[line.kind]), h("span", { class: "text", html: body }), "\n");
    })));
}

function escape(text) {
  const span = document.createElement("span");
  span.textContent = text;
  return span.innerHTML;
}

/**
 * A textarea with CUDA colouring behind it: the textarea's own text is transparent and
 * a <pre> underneath shows the same text highlighted, kept in step on every input.
 * @param {{name: string, id: string, value?: string, rows?: number, label?: string}} options
 */
export function codeEditor({ name, id, value = "", rows = 18, label = "kernel source" }) {
  const highlighted = h("code");
  const pre = h("pre", { class: "code-editor-highlight", "aria-hidden": "true" }, highlighted);
  // Under the text, a band on each line a check found wrong (markLines); gone on the next edit.
  const marks = h("pre", { class: "code-editor-marks", "aria-hidden": "true" });
  const textarea = /** @type {HTMLTextAreaElement} */ (h("textarea", { name, id, rows, spellcheck: "false",
    autocomplete: "off", autocapitalize: "off", "aria-label": label, class: "code-editor-input" }));
  textarea.value = value;
  const follow = () => {
    for (const layer of [pre, marks]) {
      layer.scrollTop = textarea.scrollTop;
      layer.scrollLeft = textarea.scrollLeft;
    }
  };
  const sync = () => {
    // A trailing newline needs a character after it, or the <pre> is one line short.
    highlighted.innerHTML = highlightCuda(textarea.value) + (textarea.value.endsWith("\n") ? " " : "");
    follow();
  };
  /** @param {Set<number>} lines the kernel's lines (from 1) to mark; none clears them */
  const markLines = (lines) => {
    if (lines.size === 0) return marks.replaceChildren();
    marks.replaceChildren(...textarea.value.split("\n").map((text, index) => h("span",
      { class: lines.has(index + 1) ? "mark-line marked" : "mark-line", "data-line": index + 1 }, `${text} `)));
    follow();
  };
  /** Select line `line` (from 1) and bring it into view. @param {number} line */
  const goToLine = (line) => {
    const [start, end] = lineRange(textarea.value, line);
    textarea.focus();
    textarea.setSelectionRange(start, end);
    // Two lines above it stay in view; 19.5 px is styles.css's 13px/1.5 should the computed
    // line height be "normal".
    const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 19.5;
    textarea.scrollTop = Math.max(0, (line - 3) * lineHeight);
    follow();
  };
  textarea.addEventListener("input", () => {
    marks.replaceChildren(); // an edit moves lines: the marks would point at the wrong ones
    sync();
  });
  textarea.addEventListener("scroll", follow);
  textarea.addEventListener("keydown", (event) => {
    if (event.key !== "Tab" || event.shiftKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault(); // Tab indents in a code box; Esc then Tab leaves it
    textarea.setRangeText("    ", textarea.selectionStart, textarea.selectionEnd, "end");
    sync();
  });
  sync();
  const root = h("div", { class: "code-editor" }, marks, pre, textarea);
  const setValue = (/** @type {string} */ text) => {
    textarea.value = text;
    marks.replaceChildren();
    sync();
  };
  return { root, textarea, setValue, sync, markLines, goToLine };
}

// A tiny element builder for the panels (d3-selection draws the SVG).

/**
 * h("div", {class: "x", onclick: fn, style: {width: "50%"}}, "text", child, [more, children])
 * Attributes that are null, undefined or false are left out; on* functions become listeners;
 * `style` is an object of CSS properties, set on el.style.
 * @param {string} tag
 * @param {Record<string, any>|null} [attrs]
 * @param {...any} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    // Through the CSSOM, never a style="" attribute: the Content-Security-Policy allows
    // no inline styles (style-src 'self'), and the CSSOM is not inline markup.
    else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (key === "html") el.innerHTML = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child == null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A <dl> of label/value pairs; values of null show as "—". */
export function facts(pairs, className = "facts") {
  return h("dl", { class: className }, pairs.filter(Boolean).map(([label, value]) => [
    h("dt", null, label), h("dd", null, value == null || value === "" ? "—" : value)]));
}

/** Summary cards: a big value over a small label each. */
export function cards(pairs) {
  return h("div", { class: "cards" }, pairs.map(([label, value]) => h("div", { class: "card" },
    h("span", { class: "card-value" }, value == null || value === "" ? "—" : value), h("span", { class: "card-label" }, label))));
}

/** A table from column labels and rows of cells. */
export function table(columns, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", null, h("tr", null, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", null, rows.map((cells) => h("tr", null, cells.map((c) => h("td", null, c))))));
}

/**
 * Tabs over one body: a tablist of buttons, each drawing its panel into the body when
 * chosen; `first` (a key) is chosen at once.
 * @param {Array<[string, string, () => Node|string]>} tabs [key, label, draw]
 * @param {string} first
 */
export function tabbed(tabs, first) {
  const body = h("div", { class: "tab-body" });
  const buttons = tabs.map(([key, label, draw]) => h("button", { type: "button", role: "tab", "data-tab": key,
    onclick: () => choose(key, draw) }, label));
  const choose = (key, draw) => {
    for (const b of buttons) b.setAttribute("aria-selected", String(b.dataset.tab === key));
    fill(body, draw());
  };
  const [key, , draw] = tabs.find(([k]) => k === first) ?? tabs[0];
  choose(key, draw);
  return [h("div", { class: "tabs", role: "tablist" }, buttons), body];
}

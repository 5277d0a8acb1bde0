// The node table beside the tree: sortable by any column, filtered by words (search in
// the tree: the tree highlights what matches), status and level; clicking a row selects
// the node. Rebuilt only when the
// rows, the query or the selection changed.
import { COLUMNS, defaultQuery, PAGE, screenedFasterNote, tableRows, toggleSort } from "../transforms/nodeTable.js";
import { format } from "../transforms/runs.js";
import { fill, h } from "./dom.js";

export class NodeTable {
  /**
   * @param {HTMLElement} container
   * @param {{onSelect: (id: number) => void,
   *   onQuery?: (query: import("../transforms/nodeTable.js").TableQuery) => void,
   *   downloads?: {csv: string, json: string}|null}} options
   *   onQuery: told each new search or filter (the tree highlights what it matches);
   *   downloads: where the whole table is served as CSV and JSON (the API's node table)
   */
  constructor(container, { onSelect, onQuery = () => {}, downloads = null }) {
    this.container = container;
    this.onSelect = onSelect;
    this.onQuery = onQuery;
    this.query = defaultQuery();
    this.key = "";
    /** @type {Iterable<import("../transforms/rows.js").NodeRow>} */
    this.rows = [];
    this.selectedId = /** @type {number|null} */ (null);
    this.version = -1;
    /** @type {{bestMs?: number|null, margin?: number|null}} */
    this.best = {};
    const search = /** @type {HTMLInputElement} */ (h("input", { type: "search", class: "node-search",
      placeholder: "search: #id, source, title, guard", "aria-label": "search the nodes",
      oninput: (/** @type {any} */ e) => this.update({ text: e.target.value }) }));
    const status = h("select", { "aria-label": "status", class: "node-status",
      onchange: (/** @type {any} */ e) => this.update({ status: e.target.value }) },
    ...[["", "any status"], ["passed", "passed"], ["failed", "failed"], ["unmeasured", "not measured"], ["pending", "pending"]]
      .map(([v, t]) => h("option", { value: v }, t)));
    const level = h("select", { "aria-label": "level", class: "node-level",
      onchange: (/** @type {any} */ e) => this.update({ level: e.target.value }) },
    ...[["", "any level"], ["full", "full gate"], ["screen", "screened only"]].map(([v, t]) => h("option", { value: v }, t)));
    this.count = h("span", { class: "muted node-count" });
    this.body = h("div", { class: "node-table-body" });
    const links = downloads ? h("span", { class: "node-downloads" }, "Download: ",
      h("a", { href: downloads.csv, download: "", "data-download": "csv" }, "CSV"), " · ",
      h("a", { href: downloads.json, download: "", "data-download": "json" }, "JSON")) : null;
    fill(container, h("div", { class: "toolbar" }, search, status, level, this.count, links), this.body);
  }

  /** @param {Partial<import("../transforms/nodeTable.js").TableQuery>} change */
  update(change) {
    this.query = { ...this.query, ...change };
    this.draw();
    this.onQuery(this.query);
  }

  /**
   * @param {Iterable<import("../transforms/rows.js").NodeRow>} rows
   * @param {number|null} selectedId
   * @param {number} version  changes whenever any row changed
   * @param {{bestMs?: number|null, margin?: number|null}} [best]  the run's best full-gate time and
   *   the screen's promotion margin: a screened row faster than the best says why it is not the best
   */
  render(rows, selectedId, version, best = {}) {
    this.best = best;
    if (version !== this.version) this.rows = [...rows]; // kept: a later query re-reads them
    Object.assign(this, { selectedId, version });
    this.draw();
  }

  draw() {
    const key = JSON.stringify([this.query, this.selectedId, this.version, this.best]);
    if (key === this.key) return;
    this.key = key;
    const { rows, matched, total } = tableRows(this.rows, this.query);
    fill(this.count, matched === total ? `${total} nodes` : `${matched} of ${total} nodes`,
      matched > PAGE ? ` (first ${PAGE} shown)` : "");
    const header = h("tr", null, COLUMNS.map(([column, label]) => h("th", { scope: "col",
      "aria-sort": this.query.sort === column ? (this.query.descending ? "descending" : "ascending") : "none" },
    h("button", { type: "button", class: "link", "data-sort": column,
      onclick: () => { this.query = toggleSort(this.query, column); this.draw(); } },
    label, this.query.sort === column ? (this.query.descending ? " ▾" : " ▴") : ""))));
    const body = rows.map((r) => h("tr", { class: `node-row status-${r.status}${r.id === this.selectedId ? " selected" : ""}`,
      "data-node-id": r.id, onclick: () => this.onSelect(r.id) },
    h("td", null, `#${r.id}`), h("td", null, r.time_ms == null ? "—" : format.ms(r.time_ms)),
    h("td", null, h("code", null, r.source)), h("td", { class: "title" }, r.title), h("td", null, r.guard || ""),
    this.levelCell(r), h("td", null, format.number(r.reward)),
    h("td", null, String(r.visits))));
    fill(this.body, h("table", { class: "node-table" }, h("thead", null, header), h("tbody", null, body)));
  }

  /** @param {import("../transforms/nodeTable.js").TableRow} r */
  levelCell(r) {
    const note = screenedFasterNote(r, this.best?.bestMs, this.best?.margin);
    if (!note) return h("td", null, r.level === "screen" ? "screen" : r.level);
    return h("td", { class: "screened-faster", title: note, "data-screen-note": note },
      "screen ", h("span", { class: "screen-why", "aria-label": note }, "(not the best: why?)"));
  }
}

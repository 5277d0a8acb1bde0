// The node table beside the tree: the run's nodes sorted and filtered, pure, so a
// 5,000-node run is sorted here and only the first page is drawn.
import { statusClass } from "./rows.js";

export const COLUMNS = /** @type {const} */ ([
  ["id", "#"], ["time_ms", "time"], ["source", "source"], ["title", "title"], ["guard", "guard"],
  ["level", "level"], ["reward", "reward"], ["visits", "visits"],
]);
export const PAGE = 200;

/**
 * @typedef {{sort: string, descending: boolean, text: string, status: string, level: string}} TableQuery
 * @typedef {{id: number, time_ms: number|null, source: string, title: string, guard: string,
 *   level: string, reward: number|null, visits: number, status: string}} TableRow
 */

/** @returns {TableQuery} */
export function defaultQuery() {
  return { sort: "time_ms", descending: false, text: "", status: "", level: "" };
}

/**
 * @param {Iterable<import("./rows.js").NodeRow>} rows
 * @param {TableQuery} query
 * @returns {{rows: TableRow[], total: number, matched: number}}
 */
export function tableRows(rows, query) {
  const all = [...rows].map(tableRow);
  const matched = all.filter(matcher(query));
  const key = COLUMNS.some(([k]) => k === query.sort) ? query.sort : "id";
  const sign = query.descending ? -1 : 1;
  matched.sort((a, b) => {
    const x = /** @type {any} */ (a)[key], y = /** @type {any} */ (b)[key];
    // Missing values (a node that failed has no time) always go last, whichever way.
    if (x == null || x === "") return y == null || y === "" ? a.id - b.id : 1;
    if (y == null || y === "") return -1;
    const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sign * order || a.id - b.id;
  });
  return { rows: matched.slice(0, PAGE), total: all.length, matched: matched.length };
}

/**
 * Why a node only the screen measured shows a time below the run's best (a full-gate
 * time), in a few words for its row; null for any other row. The screen promotes a kernel
 * to the full gate only when it finds it more than `margin` (the run API's
 * promote_margin) faster than the best full-gate time; the inspector says it at length.
 * @param {{level?: string, status?: string, time_ms?: number|null}} row
 * @param {number|null|undefined} bestMs  the run's best, always a full-gate time
 * @param {number|null|undefined} margin  a fraction, e.g. 0.02
 * @returns {string|null}
 */
export function screenedFasterNote(row, bestMs, margin) {
  const time = row.time_ms;
  if (row.level !== "screen" || row.status !== "passed" || time == null || !bestMs || time >= bestMs) return null;
  const faster = (bestMs - time) / bestMs;
  const needed = margin == null ? "" : `, not the more than ${percent(margin)} that earns the full gate`;
  return `screened only: ${percent(faster)} faster than the best full-gate time${needed}`;
}

function percent(/** @type {number} */ fraction) {
  return `${Number((fraction * 100).toPrecision(fraction < 0.1 ? 2 : 3))}%`;
}

/**
 * The nodes the table's search and filters match, for the tree to highlight: the same
 * rule as the table's, over every node (not one page). null when nothing is asked for.
 * @param {Iterable<import("./rows.js").NodeRow>} rows
 * @param {TableQuery} query
 * @returns {Set<number>|null}
 */
export function matchingIds(rows, query) {
  if (!query.text.trim() && !query.status && !query.level) return null;
  const matches = matcher(query);
  const ids = new Set();
  for (const r of rows) {
    const row = tableRow(r);
    if (matches(row)) ids.add(row.id);
  }
  return ids;
}

/** @param {TableQuery} query @returns {(row: TableRow) => boolean} */
function matcher(query) {
  const words = query.text.trim().toLowerCase().split(/\s+/).filter(Boolean);
  return (r) => (!query.status || r.status === query.status)
    && (!query.level || r.level === query.level)
    && words.every((w) => `#${r.id} ${r.source} ${r.title} ${r.guard}`.toLowerCase().includes(w));
}

/** @param {import("./rows.js").NodeRow} r @returns {TableRow} */
function tableRow(r) {
  return {
    id: r.id, time_ms: Number.isFinite(r.time_ms) ? /** @type {number} */ (r.time_ms) : null,
    source: String(r.source ?? ""), title: String(r.title ?? ""), guard: String(r.guard ?? ""),
    level: String(r.level ?? ""), reward: Number.isFinite(r.reward) ? /** @type {number} */ (r.reward) : null,
    visits: Number(r.visits ?? 0), status: statusClass(r),
  };
}

/**
 * Clicking a column's header: sort by it, or turn the order round when it is already
 * the sort.
 * @param {TableQuery} query
 * @param {string} column
 * @returns {TableQuery}
 */
export function toggleSort(query, column) {
  return query.sort === column ? { ...query, descending: !query.descending }
    : { ...query, sort: column, descending: column === "reward" || column === "visits" };
}

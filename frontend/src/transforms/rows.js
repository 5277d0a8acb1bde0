// Flat node rows as the API and the event log send them, made uniform: `parentId`
// (the REST rows) or `parent` (the engine's event rows) becomes `parentId`.

/**
 * @typedef {{id: number, parentId: number|null, state?: string, status?: string|null,
 *   source?: string, title?: string, guard?: string|null, time_ms?: number|null,
 *   spread_ms?: number|null, reward?: number|null, visits?: number, value?: number,
 *   prior?: number, evaluation?: number|null, [key: string]: any}} NodeRow
 */

/**
 * @param {Record<string, any>} raw
 * @returns {NodeRow}
 */
export function normalizeRow(raw) {
  if (raw == null || typeof raw !== "object") throw new TypeError(`a node row must be an object, got ${raw}`);
  const id = Number(raw.id);
  if (raw.id == null || !Number.isInteger(id)) throw new TypeError(`a node row needs an integer id, got ${JSON.stringify(raw.id)}`);
  const parentRaw = raw.parentId !== undefined ? raw.parentId : raw.parent;
  const parentId = parentRaw == null ? null : Number(parentRaw);
  if (parentId != null && !Number.isInteger(parentId)) {
    throw new TypeError(`node ${id}: parentId must be an integer or null, got ${JSON.stringify(parentRaw)}`);
  }
  const row = /** @type {NodeRow} */ ({ ...raw, id, parentId });
  delete row.parent;
  return row;
}

/**
 * A node that did not pass: refused by the gate, or not measured at all (status "error":
 * no verdict could be had); both fold into a parent's stub, which counts them apart.
 * @param {NodeRow} row
 */
export function isFailed(row) {
  return row.state === "done" && row.status !== "passed";
}

/** @param {NodeRow} row */
export function isPassed(row) {
  return row.state === "done" && row.status === "passed";
}

/** @param {NodeRow} row @returns {"pending"|"passed"|"failed"|"unmeasured"} */
export function statusClass(row) {
  if (row.state !== "done") return "pending";
  if (row.status === "error") return "unmeasured"; // the evaluator's failure, not the kernel's
  return row.status === "passed" ? "passed" : "failed";
}

const MEASURED = ["state", "status", "guard", "time_ms", "spread_ms", "reward", "level"];

/**
 * Merges a newer report of a node into what is known. Reports may arrive out of order
 * (a snapshot, then a replay of older events), so the merge only moves forward: a done
 * node never goes back to pending, and visits (which only grow in MCTS) never shrink;
 * `value` follows the report with the most visits.
 * @param {NodeRow|undefined} known
 * @param {NodeRow} incoming
 * @returns {NodeRow}
 */
export function mergeRow(known, incoming) {
  if (!known) return incoming;
  /** @type {NodeRow} */
  const merged = { ...known };
  for (const [key, value] of Object.entries(incoming)) {
    if (value !== undefined) merged[key] = value;
  }
  if (known.state === "done" && incoming.state !== "done") {
    for (const key of MEASURED) merged[key] = known[key];
  }
  if ((incoming.visits ?? 0) < (known.visits ?? 0)) {
    merged.visits = known.visits;
    merged.value = known.value;
  }
  return merged;
}

/**
 * What changed between two versions of a run's rows, as far as drawing goes: the tree's
 * shape (a node added or gone, a parent changed, a node that failed or stopped failing:
 * failed subtrees fold) and the measurements (any change to a done node: the timeline).
 * Rows are compared by identity: events replace the rows they change (mergeRow) and keep
 * the others.
 * @param {Map<number, NodeRow>|null} before
 * @param {Map<number, NodeRow>} after
 * @returns {{shape: boolean, measured: boolean}}
 */
export function rowChanges(before, after) {
  if (before === after) return { shape: false, measured: false };
  if (before == null) return { shape: true, measured: true };
  let shape = before.size !== after.size;
  let measured = false;
  for (const [id, row] of after) {
    const old = before.get(id);
    if (old === row) continue;
    if (old == null || old.parentId !== row.parentId || isFailed(old) !== isFailed(row)) shape = true;
    if (row.state === "done" || old?.state === "done") measured = true;
    if (shape && measured) break;
  }
  return { shape, measured };
}

// The best node and the path to it from the root: the story the tree tells.
import { isPassed } from "./rows.js";

/**
 * The run's own best if it names one we have, else the fastest passing node (lower id
 * on a tie, so the answer does not depend on arrival order).
 * @param {Map<number, import("./rows.js").NodeRow>} rows
 * @param {number|null|undefined} [runBest]
 * @returns {number|null}
 */
export function bestNodeId(rows, runBest) {
  if (runBest != null && rows.has(runBest) && isPassed(/** @type {any} */ (rows.get(runBest)))) return runBest;
  let best = null;
  for (const row of rows.values()) {
    if (!isPassed(row) || row.time_ms == null) continue;
    if (best == null || row.time_ms < /** @type {number} */ (best.time_ms) || (row.time_ms === best.time_ms && row.id < best.id)) best = row;
  }
  return best ? best.id : null;
}

/**
 * Ids from the root down to `id`, inclusive; [] if `id` is unknown. Stops at a missing
 * parent (still in flight) or a cycle rather than looping.
 * @param {Map<number, import("./rows.js").NodeRow>} rows
 * @param {number|null} id
 * @returns {number[]}
 */
export function pathFromRoot(rows, id) {
  const path = [];
  const seen = new Set();
  let current = id == null ? undefined : rows.get(id);
  while (current && !seen.has(current.id)) {
    seen.add(current.id);
    path.push(current.id);
    current = current.parentId == null ? undefined : rows.get(current.parentId);
  }
  return path.reverse();
}

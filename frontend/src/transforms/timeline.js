// Best-so-far over evaluations: for each measured node in evaluation order, its own time
// and the best passing time up to then.
import { isPassed } from "./rows.js";

/**
 * @typedef {{index: number, id: number, time_ms: number|null, passed: boolean,
 *   best_ms: number|null, bestId: number|null, improved: boolean}} TimelinePoint
 */

/**
 * Evaluation order is the row's `evaluation` index where the server gave one, else its
 * id (ids are handed out in the order nodes are asked for). Reused nodes (no evaluation
 * of their own) are left out: they cost nothing.
 * @param {Iterable<import("./rows.js").NodeRow>} rows
 * @returns {TimelinePoint[]}
 */
export function bestSoFar(rows) {
  const measured = [...rows].filter((row) => row.state === "done" && !row.reused)
    .sort((a, b) => order(a) - order(b) || a.id - b.id);
  /** @type {TimelinePoint[]} */
  const points = [];
  let best = null;
  measured.forEach((row, i) => {
    const passed = isPassed(row) && Number.isFinite(row.time_ms);
    const improved = passed && (best == null || /** @type {number} */ (row.time_ms) < best.time_ms);
    if (improved) best = row;
    points.push({ index: i + 1, id: row.id, time_ms: passed ? /** @type {number} */ (row.time_ms) : null, passed,
      best_ms: best ? best.time_ms : null, bestId: best ? best.id : null, improved });
  });
  return points;
}

function order(row) {
  return Number.isFinite(row.evaluation) ? row.evaluation : row.id;
}

/**
 * Two compared runs' best-so-far curves (the compare API's `best_so_far`: each run's best
 * time after each evaluation, null before its first passing kernel), as the points to
 * draw: evaluation 1, 2, … against a time, the nulls left out.
 * @param {{id: number, task: string, best_so_far?: (number|null)[]}[]} runs
 * @returns {{label: string, points: {x: number, y: number}[]}[]}
 */
export function compareCurves(runs) {
  return runs.map((run) => ({
    label: `#${run.id} ${run.task}`,
    points: (run.best_so_far ?? []).flatMap((ms, i) => (typeof ms === "number" && ms > 0 ? [{ x: i + 1, y: ms }] : [])),
  }));
}

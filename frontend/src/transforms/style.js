// How a node looks: colour by status and reward, radius by visits.
import { scaleLinear, scaleSqrt } from "d3-scale";
import { statusClass } from "./rows.js";

export const COLOURS = Object.freeze({
  pending: "#9aa5b1",
  failed: "#d64545",
  worse: "#e8893b", // passed, negative reward: slower than its parent
  neutral: "#d9d9d9",
  better: "#1f9e6e", // passed, positive reward
  stub: "#f3c4c4",
  unmeasured: "#f4f1ea", // no verdict could be had (no recording, no GPU): drawn hollow-ish, never red
});

/**
 * A colour function for a set of rows: rewards map onto worse -> neutral -> better,
 * symmetric around 0 so that the same colour means the same size of gain on both sides.
 * @param {Iterable<import("./rows.js").NodeRow>} rows
 */
export function nodeColourScale(rows) {
  let extent = 0;
  for (const row of rows) {
    if (statusClass(row) === "passed" && Number.isFinite(row.reward)) extent = Math.max(extent, Math.abs(/** @type {number} */ (row.reward)));
  }
  const reward = scaleLinear().domain([-(extent || 1), 0, extent || 1])
    .range(/** @type {any} */ ([COLOURS.worse, COLOURS.neutral, COLOURS.better])).clamp(true);
  /** @param {import("./rows.js").NodeRow} row @returns {string} */
  const colour = (row) => {
    const status = statusClass(row);
    if (status !== "passed") return COLOURS[status];
    return Number.isFinite(row.reward) ? String(reward(/** @type {number} */ (row.reward))) : COLOURS.neutral;
  };
  // Two scales with the same key colour every row alike: a redraw compares keys, not colours.
  return Object.assign(colour, { key: `reward±${extent}` });
}

export const RADIUS = Object.freeze({ min: 3, max: 11 }); // px; area grows with visits

/**
 * @param {Iterable<import("./rows.js").NodeRow>} rows
 * @returns {((visits: number|undefined) => number) & {key: string}}
 */
export function nodeRadiusScale(rows) {
  let most = 1;
  for (const row of rows) most = Math.max(most, row.visits ?? 0);
  const scale = scaleSqrt().domain([0, most]).range([RADIUS.min, RADIUS.max]).clamp(true);
  const radius = (/** @type {number|undefined} */ visits) => Math.round(scale(visits ?? 0) * 10) / 10;
  return Object.assign(radius, { key: `visits≤${most}` });
}

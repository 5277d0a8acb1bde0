// Roofline geometry (Williams, Waterman & Patterson, CACM 2009): attainable FLOP/s =
// min(peak FLOP/s, DRAM bandwidth × arithmetic intensity), on log-log axes. Where the
// node was profiled with the counters for it, also Nsight Compute's hierarchical roofline:
// one roof and one point for each of L1, L2 and DRAM, from the node's own counts and its
// GPU's own ceilings (search.inspector.roofline's `measured`).

/**
 * @typedef {{flops?: number, bytes?: number, time_ms?: number, intensity?: number,
 *   achieved_flops_per_s?: number, achieved_bytes_per_s?: number,
 *   ceilings?: {dram_bytes_per_s?: number, fp32_flops_per_s?: number, source?: string}|null, gpu?: string|null,
 *   measured?: {achieved_flops_per_s?: number | null, fp32_flops_per_s?: number | null,
 *     levels?: {level: string, intensity?: number | null, ceiling_bytes_per_s?: number | null}[]} | null}} Roofline
 */

export class RooflineError extends Error {
  constructor(message) {
    super(message);
    this.name = "RooflineError";
  }
}

const positive = (value) => typeof value === "number" && Number.isFinite(value) && value > 0;

/**
 * @param {Roofline} roofline
 */
export function rooflineModel(roofline) {
  if (roofline == null || typeof roofline !== "object") throw new RooflineError("no roofline data");
  if (roofline.ceilings == null) {
    throw new RooflineError(`no datasheet ceilings for ${roofline.gpu ?? "the GPU that measured it"}, so no roofline`);
  }
  const dram = /** @type {number} */ (roofline.ceilings?.dram_bytes_per_s);
  const peak = /** @type {number} */ (roofline.ceilings?.fp32_flops_per_s);
  if (!positive(dram) || !positive(peak)) throw new RooflineError(`ceilings need positive dram_bytes_per_s and fp32_flops_per_s, got ${JSON.stringify(roofline.ceilings)}`);
  const seconds = positive(roofline.time_ms) ? /** @type {number} */ (roofline.time_ms) / 1e3 : null;
  const intensity = positive(roofline.intensity) ? roofline.intensity
    : positive(roofline.flops) && positive(roofline.bytes) ? /** @type {number} */ (roofline.flops) / /** @type {number} */ (roofline.bytes) : null;
  const achieved = positive(roofline.achieved_flops_per_s) ? roofline.achieved_flops_per_s
    : positive(roofline.flops) && seconds ? /** @type {number} */ (roofline.flops) / seconds : null;
  if (intensity == null || achieved == null) throw new RooflineError("the node's FLOPs, bytes or time are missing: nothing to place on the roofline");
  const ridge = peak / dram; // FLOP/byte where the roofs meet
  const levels = measuredLevels(roofline.measured, peak);
  const xs = [intensity, ridge, ...levels.flatMap((l) => [l.x, l.ridge])];
  const x0 = decadeBelow(Math.min(...xs) / 4);
  const x1 = decadeAbove(Math.max(...xs) * 4);
  const attainable = Math.min(peak, dram * intensity);
  const y0 = decadeBelow(Math.min(achieved, dram * x0, ...levels.map((l) => l.y)) / 2);
  const y1 = decadeAbove(peak * 2);
  return {
    levels,
    point: { x: intensity, y: achieved },
    roof: [{ x: x0, y: dram * x0 }, { x: ridge, y: peak }, { x: x1, y: peak }],
    ridge,
    xDomain: [x0, x1],
    yDomain: [y0, y1],
    attainable,
    efficiency: achieved / attainable, // fraction of the roof above the point
    bound: intensity < ridge ? "memory" : "compute",
    source: roofline.ceilings?.source ?? null,
  };
}

/**
 * The measured levels that can be placed: each with its intensity (FLOP per byte through
 * it), the kernel's measured FLOP/s, its bandwidth ceiling and where that roof meets the
 * compute peak. A level the kernel moved no bytes through, or did no FLOP over, is left out.
 * @param {Roofline["measured"]} measured
 * @param {number} peak
 */
function measuredLevels(measured, peak) {
  if (measured == null || !Array.isArray(measured.levels) || !positive(measured.achieved_flops_per_s)) return [];
  const y = /** @type {number} */ (measured.achieved_flops_per_s);
  return measured.levels
    .filter((l) => positive(l.intensity) && positive(l.ceiling_bytes_per_s))
    .map((l) => ({
      level: l.level, x: /** @type {number} */ (l.intensity), y,
      bandwidth: /** @type {number} */ (l.ceiling_bytes_per_s),
      ridge: peak / /** @type {number} */ (l.ceiling_bytes_per_s),
    }));
}

function decadeBelow(value) {
  return 10 ** Math.floor(Math.log10(value));
}

function decadeAbove(value) {
  return 10 ** Math.ceil(Math.log10(value));
}

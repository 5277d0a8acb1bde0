// Metric deltas: the server sends ratios (after / before); people read percent change.
// Sorted by how far each moved (|ln ratio|), so a halving and a doubling rank the same.

/**
 * @typedef {{metric: string, ratio: number|null, percent: number|null, magnitude: number}} MetricDelta
 */

/**
 * @param {Record<string, number>|null|undefined} ratios
 * @returns {MetricDelta[]}
 */
export function metricDeltas(ratios) {
  if (ratios == null) return [];
  if (typeof ratios !== "object" || Array.isArray(ratios)) throw new TypeError(`ratios must be an object of metric -> ratio, got ${JSON.stringify(ratios)}`);
  const rows = Object.entries(ratios).map(([metric, raw]) => {
    const ratio = typeof raw === "number" && Number.isFinite(raw) && raw > 0 ? raw : null;
    return {
      metric,
      ratio,
      percent: ratio == null ? null : (ratio - 1) * 100,
      magnitude: ratio == null ? -1 : Math.abs(Math.log(ratio)),
    };
  });
  // Unusable ratios (zero, negative, missing) sort last; ties by name keep a fixed order.
  return rows.sort((a, b) => b.magnitude - a.magnitude || a.metric.localeCompare(b.metric));
}

/**
 * Bar geometry for deltas, in percent of a half-width: 0 is no change, ±100 the largest
 * shown change (clamped at `capPercent`, so one 40x outlier does not flatten the rest).
 * @param {MetricDelta[]} deltas
 * @param {{capPercent?: number}} [options]
 */
export function deltaBars(deltas, { capPercent = 200 } = {}) {
  if (!(capPercent > 0)) throw new RangeError(`capPercent must be positive, got ${capPercent}`);
  const largest = Math.min(capPercent, Math.max(1e-9, ...deltas.map((d) => Math.abs(d.percent ?? 0))));
  return deltas.map((d) => {
    const percent = d.percent ?? 0;
    const length = (Math.min(Math.abs(percent), capPercent) / largest) * 100;
    return { metric: d.metric, direction: percent < 0 ? "down" : percent > 0 ? "up" : "none", length, clipped: Math.abs(percent) > capPercent };
  });
}

/** "+12.3%", "−45.0%", "±0%" or "—" */
export function formatPercent(percent) {
  if (percent == null || !Number.isFinite(percent)) return "—";
  if (Math.abs(percent) < 0.05) return "±0%";
  const sign = percent > 0 ? "+" : "−";
  return `${sign}${Math.abs(percent).toFixed(1)}%`;
}

// Reconnect delays: exponential with a cap, and jitter so that many browsers dropped by
// one server restart do not all come back in the same millisecond.
import { checkOptions } from "./options.js";

export const BACKOFF_DEFAULTS = Object.freeze({ initialMs: 500, maxMs: 15000, factor: 2, jitter: 0.2 });

/**
 * @param {number} attempt 0 for the first retry
 * @param {{initialMs?: number, maxMs?: number, factor?: number, jitter?: number}} [options]
 * @param {() => number} [random] in [0, 1)
 */
export function backoffDelay(attempt, options, random = Math.random) {
  const o = checkOptions("backoffDelay", options, {
    initialMs: { type: "number", default: BACKOFF_DEFAULTS.initialMs, min: 0 },
    maxMs: { type: "number", default: BACKOFF_DEFAULTS.maxMs, min: 0 },
    factor: { type: "number", default: BACKOFF_DEFAULTS.factor, min: 1 },
    jitter: { type: "number", default: BACKOFF_DEFAULTS.jitter, min: 0, max: 1 },
  });
  if (!Number.isInteger(attempt) || attempt < 0) throw new RangeError(`attempt must be a whole number, got ${attempt}`);
  const base = Math.min(o.maxMs, o.initialMs * o.factor ** attempt);
  const spread = base * o.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(Math.min(o.maxMs, base + spread)));
}

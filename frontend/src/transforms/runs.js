// The runs list: the query its filters make, and a summary of what it shows.

export const RUN_STATUSES = /** @type {const} */ (["running", "paused", "stopped", "finished", "failed"]);

/**
 * @param {{task?: string, status?: string, mine?: boolean}} filters
 * @returns {string} "?task=relu&mine=1", or "" with no filter
 */
export function runsQuery(filters) {
  const params = new URLSearchParams();
  if (filters.task) params.set("task", filters.task);
  if (filters.status) {
    if (!RUN_STATUSES.includes(/** @type {any} */ (filters.status))) throw new RangeError(`unknown run status ${JSON.stringify(filters.status)}`);
    params.set("status", filters.status);
  }
  if (filters.mine) params.set("mine", "1");
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** @param {URLSearchParams} params */
export function filtersFromQuery(params) {
  const status = params.get("status") ?? "";
  return {
    task: params.get("task") ?? "",
    status: RUN_STATUSES.includes(/** @type {any} */ (status)) ? status : "",
    mine: params.get("mine") === "1",
  };
}

/**
 * @param {Array<{status: string, speedup?: number|null, gpu_seconds?: number|null, evaluated?: number}>} runs
 */
export function runsSummary(runs) {
  /** @type {Record<string, number>} */
  const byStatus = {};
  let bestSpeedup = null, gpuSeconds = 0, evaluations = 0;
  for (const run of runs) {
    byStatus[run.status] = (byStatus[run.status] ?? 0) + 1;
    if (run.speedup != null && (bestSpeedup == null || run.speedup > bestSpeedup)) bestSpeedup = run.speedup;
    gpuSeconds += run.gpu_seconds ?? 0;
    evaluations += run.evaluated ?? 0;
  }
  return { count: runs.length, byStatus, bestSpeedup, gpuSeconds, evaluations };
}

/** Numbers as people read them in the tables. */
export const format = {
  ms: (v) => (v == null || !Number.isFinite(v) ? "—" : v >= 100 ? `${v.toFixed(1)} ms` : v >= 1 ? `${v.toFixed(3)} ms` : `${(v * 1000).toFixed(1)} µs`),
  speedup: (v) => (v == null || !Number.isFinite(v) ? "—" : `${v.toFixed(2)}×`),
  seconds: (v) => (v == null || !Number.isFinite(v) ? "—" : v >= 3600 ? `${(v / 3600).toFixed(1)} h` : v >= 60 ? `${(v / 60).toFixed(1)} min` : `${v.toFixed(1)} s`),
  number: (v, digits = 3) => (v == null || !Number.isFinite(v) ? "—" : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : Number(v.toFixed(digits)).toString()),
  bytes: (v) => {
    if (v == null || !Number.isFinite(v)) return "—";
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0, x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
    return `${i ? x.toFixed(1) : x} ${units[i]}`;
  },
  rate: (v, unit) => {
    if (v == null || !Number.isFinite(v)) return "—";
    const prefixes = [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]];
    for (const [p, s] of prefixes) if (Math.abs(v) >= /** @type {number} */ (s)) return `${(v / /** @type {number} */ (s)).toFixed(1)} ${p}${unit}`;
    return `${v.toFixed(1)} ${unit}`;
  },
};

/**
 * How a finished run came out, as the API's `outcome` says it (search.selectors.run_outcome):
 * from its best node, which is only ever a kernel the full gate passed.
 * @param {{status?: string, best_node?: number|null}} run
 */
export function runOutcome(run) {
  if (run.status !== "finished") return "";
  if (run.best_node == null) return "nothing_passed";
  return run.best_node === 0 ? "no_gain" : "improved";
}

/**
 * The run's best time over the vendor library's on the same GPU, with where the vendor's
 * time came from: "1.23× (vendor measured on this GPU (NVIDIA H100 80GB HBM3) on
 * 2026-12-07)", "2.02× (vendor recorded on the H200)". From the times, not the API's
 * `speedup_vs_vendor`, which a live page's events do not update. Null when either time is
 * unknown: the API gives no vendor time for a GPU that has none of its own (issue 33).
 * @param {{best_ms?: number|null, vendor_ms?: number|null, vendor_gpu?: string|null,
 *   vendor_source?: string|null}} run
 * @returns {string|null}
 */
export function vendorSpeedup(run) {
  const { best_ms: best, vendor_ms: vendor } = run;
  if (best == null || vendor == null || !(best > 0) || !(vendor > 0)) return null;
  const where = run.vendor_source ? ` (vendor ${run.vendor_source})`
    : run.vendor_gpu ? ` (vendor on ${run.vendor_gpu})` : "";
  return format.speedup(vendor / best) + where;
}

/**
 * The header's "vs vendor": the best's speed-up over the vendor (vendorSpeedup) where the
 * GPU that measured the run has a vendor time, else "no vendor time on <that GPU>"; null
 * before anything was measured (the API's `measured_gpu` is null then).
 * @param {{best_ms?: number|null, vendor_ms?: number|null, vendor_gpu?: string|null,
 *   vendor_source?: string|null, measured_gpu?: string|null}} run
 * @returns {string|null}
 */
export function vendorComparison(run) {
  const over = vendorSpeedup(run);
  if (over) return over;
  return run.measured_gpu && run.vendor_ms == null ? `no vendor time on ${run.measured_gpu}` : null;
}

/**
 * The status badge's words: a finished run says when it found nothing, so a run whose
 * every kernel failed is not shown as a plain green "finished"; a running run that waits
 * for a GPU worker (the API's `queued_since`) says so.
 * @param {{status?: string, outcome?: string, imported?: boolean, queued_since?: string|null}} run
 */
export function statusLabel(run) {
  const words = { nothing_passed: "finished: nothing passed", no_gain: "finished: no gain" };
  const queued = run.status === "running" && run.queued_since ? "queued for a GPU worker" : null;
  const label = queued || (run.status === "finished" && words[run.outcome ?? ""]) || (run.status ?? "");
  return run.imported ? `${label} (imported)` : label;
}

/**
 * The progress line under a session's header. A run that ended says so rather than
 * "90 / 100": a search may stop before its budget (nothing left to try, stopped by its
 * owner), and an imported run is a complete record.
 * @param {{evaluated: number, budget: number|null, pending: number, nodes: number}} p
 * `queued` of the evaluations under way wait in the GPU queue behind `queuedAhead` of
 * other runs' (a count: the API names neither other runs nor GPU workers); `measuring`
 * of them a GPU worker measures now.
 * @param {{status?: string, imported?: boolean, waiting?: number,
 *   perMinute?: number|null, minutesLeft?: number|null, underWay?: number, queued?: number,
 *   queuedAhead?: number, measuring?: number}} run
 */
export function progressLine(p, { status, imported = false, waiting = 0, perMinute = null,
  minutesLeft = null, underWay = 0, queued = 0, queuedAhead = 0, measuring = 0 }) {
  const ended = status === "finished" || status === "stopped" || status === "failed";
  const counted = ended
    ? `${p.evaluated} evaluated · ${imported ? "complete (imported)" : status === "finished" ? "complete" : status}`
    : `${p.evaluated} / ${p.budget ?? "?"} evaluated · ${p.pending} pending`;
  return `${counted} · ${p.nodes} nodes` + (!ended && waiting ? ` · ${waiting} waiting for their parent` : "")
    + (!ended && perMinute ? ` · ${Number(perMinute.toPrecision(3))} candidates/min` : "")
    + (!ended && minutesLeft != null && perMinute ? ` · about ${minutesText(minutesLeft)} left` : "")
    + (!ended && underWay ? ` · ${underWay} under way on GPU workers` : "")
    + (!ended && underWay && measuring ? ` (${measuring} being measured)` : "")
    + (!ended && queued ? ` · ${queued} waiting for a GPU worker`
      + (queuedAhead ? `, ${queuedAhead} evaluation(s) of other runs ahead in the queue` : "") : "");
}

function minutesText(/** @type {number} */ minutes) {
  if (minutes < 1) return "under a minute";
  if (minutes < 90) return `${Math.round(minutes)} min`;
  return `${(minutes / 60).toFixed(1)} h`;
}


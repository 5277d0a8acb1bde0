// The run's event log applied to a client-side state, keyed by seq. The server's log has
// no gaps (seq 1, 2, 3...), so a client can tell what it missed: duplicates (a replay
// after a reconnect) are skipped, and a jump past lastSeq + 1 stops the batch and reports
// the gap, for the caller to fetch /events/?after=lastSeq and apply again.
import { runOutcome } from "./runs.js";
import { mergeRow, normalizeRow } from "./rows.js";

/**
 * @typedef {import("./rows.js").NodeRow} NodeRow
 * @typedef {{seq: number, kind: string, data: Record<string, any>}} RunEvent
 * @typedef {{lastSeq: number, rows: Map<number, NodeRow>, run: Record<string, any>,
 *   unknownKinds: string[]}} LiveState
 * @typedef {{after: number, next: number}} Gap
 */

/**
 * @param {{run?: Record<string, any>, nodes?: Iterable<Record<string, any>>, lastSeq?: number}} [snapshot]
 * @returns {LiveState}
 */
export function initialState(snapshot = {}) {
  const rows = new Map();
  for (const raw of snapshot.nodes ?? []) {
    const row = normalizeRow(raw);
    rows.set(row.id, mergeRow(rows.get(row.id), row));
  }
  const lastSeq = snapshot.lastSeq ?? snapshot.run?.last_seq ?? 0;
  if (!Number.isInteger(lastSeq) || lastSeq < 0) throw new TypeError(`lastSeq must be a whole number, got ${lastSeq}`);
  return { lastSeq, rows, run: { ...(snapshot.run ?? {}) }, unknownKinds: [] };
}

/**
 * @param {LiveState} state
 * @param {RunEvent[]} events
 * @returns {{state: LiveState, applied: number, gap: Gap|null}}
 */
export function applyEvents(state, events) {
  const ordered = [...events].sort((a, b) => a.seq - b.seq);
  let next = state;
  let copied = false;
  let applied = 0;
  for (const event of ordered) {
    if (!Number.isInteger(event.seq)) throw new TypeError(`an event needs an integer seq, got ${JSON.stringify(event.seq)}`);
    if (event.seq <= next.lastSeq) continue; // seen already: a replay
    if (event.seq > next.lastSeq + 1) return { state: next, applied, gap: { after: next.lastSeq, next: event.seq } };
    if (!copied) {
      // One copy per batch, not per event: the rows map can hold thousands of nodes.
      next = { ...next, rows: new Map(next.rows), run: { ...next.run }, unknownKinds: [...next.unknownKinds] };
      copied = true;
    }
    applyOne(next, event);
    next.lastSeq = event.seq;
    applied += 1;
  }
  return { state: next, applied, gap: null };
}

/** Mutates `state`, a copy that applyEvents owns. */
function applyOne(state, { kind, data }) {
  const run = state.run;
  switch (kind) {
    case "run_created":
      Object.assign(run, pick(data, ["task", "budget", "judge"]));
      run.status ??= "running";
      break;
    case "node_added":
    case "node_evaluated": {
      const row = normalizeRow(data);
      state.rows.set(row.id, mergeRow(state.rows.get(row.id), row));
      if (kind === "node_evaluated" && Number.isInteger(data.evaluation)) {
        run.evaluated = Math.max(run.evaluated ?? 0, data.evaluation);
      }
      if (kind === "node_evaluated" && row.parentId == null && row.status === "passed" && row.time_ms != null) {
        run.root_ms = row.time_ms; // the baseline every speedup is measured against
        if (run.best_ms) run.speedup = run.root_ms / run.best_ms;
      }
      break;
    }
    case "best_improved":
      run.best_node = data.id;
      if (data.time_ms != null) run.best_ms = data.time_ms;
      if (run.root_ms && run.best_ms) run.speedup = run.root_ms / run.best_ms;
      break;
    case "run_status":
      run.status = data.status;
      if (data.message != null) run.message = data.message;
      // Set while a running run waits, queued for a GPU worker; null once it leaves the queue.
      if ("queued_since" in data) run.queued_since = data.queued_since;
      break;
    case "run_finished":
      // A run stopped by a person stays "stopped"; otherwise the budget was spent.
      if (run.status !== "stopped") run.status = "finished";
      run.summary = data;
      if (data.evaluations != null) run.evaluated = data.evaluations;
      if (data.best_id != null) run.best_node = data.best_id;
      if (data.best_time_ms != null) run.best_ms = data.best_time_ms;
      if (data.root_time_ms != null) run.root_ms = data.root_time_ms;
      if (data.speedup_vs_root != null) run.speedup = data.speedup_vs_root;
      if (data.message != null) run.message = data.message;
      if (run.status === "finished") run.outcome = runOutcome(run);
      break;
    default:
      // A newer server may send kinds this client does not know: note them, go on.
      if (!state.unknownKinds.includes(kind)) state.unknownKinds.push(kind);
  }
}

function pick(object, keys) {
  return Object.fromEntries(keys.filter((key) => object[key] !== undefined).map((key) => [key, object[key]]));
}

/**
 * A progress frame of the run's socket applied to a live state: its `data` is
 * search.selectors.run_progress, under the run API's own names (evaluated, gpu_seconds,
 * queue, and the header's measured_gpu and vendor time), so the page's first render (from
 * the API) and every pushed update read the same numbers. Evaluations never go back (events may have counted further already); the run's
 * status is not in it: that comes in order, with the events.
 * @param {LiveState} state
 * @param {{evaluated?: number, gpu_seconds?: number, queue?: Record<string, any>,
 *   measured_gpu?: string|null, vendor_ms?: number|null, vendor_gpu?: string|null,
 *   vendor_source?: string|null}} data
 * @returns {LiveState}
 */
export function applyProgress(state, data) {
  if (data == null || typeof data !== "object") throw new TypeError(`a progress frame needs an object, got ${JSON.stringify(data)}`);
  const run = { ...state.run };
  if (Number.isFinite(data.evaluated)) run.evaluated = Math.max(run.evaluated ?? 0, /** @type {number} */ (data.evaluated));
  if (Number.isFinite(data.gpu_seconds)) run.gpu_seconds = data.gpu_seconds;
  if (data.queue && typeof data.queue === "object") run.queue = { ...data.queue };
  // The vendor comparison of the header: set once the run's first (or a new best) kernel is measured.
  for (const key of ["measured_gpu", "vendor_ms", "vendor_gpu", "vendor_source"]) {
    if (key in data) run[key] = data[key];
  }
  return { ...state, run };
}

/**
 * Progress of a run from its state: evaluations against the budget, and nodes waiting.
 * @param {LiveState} state
 */
export function progress(state) {
  let pending = 0;
  let done = 0;
  for (const row of state.rows.values()) {
    if (row.state === "done") done += 1;
    else pending += 1;
  }
  const evaluated = Math.max(state.run.evaluated ?? 0, 0);
  const budget = state.run.budget ?? state.run.queue?.budget ?? null;
  const fraction = budget ? Math.min(1, evaluated / budget) : 0;
  return { evaluated, budget, pending, done, nodes: state.rows.size, fraction };
}

/**
 * Folds a fresh snapshot (the REST view of the run) into a live state: rows merge
 * forward (see mergeRow), run fields take the snapshot's values, and lastSeq never goes
 * back, so events already applied are not applied twice.
 * @param {LiveState} state
 * @param {{run?: Record<string, any>, nodes?: Iterable<Record<string, any>>}} snapshot
 * @returns {LiveState}
 */
export function mergeSnapshot(state, snapshot) {
  const rows = new Map(state.rows);
  for (const raw of snapshot.nodes ?? []) {
    const row = normalizeRow(raw);
    rows.set(row.id, mergeRow(rows.get(row.id), row));
  }
  return { ...state, rows, run: { ...state.run, ...(snapshot.run ?? {}) } };
}

// The session page: a run's live tree, its progress and controls, the best-so-far
// timeline, the story of the best path, and the node inspector. Read-only when shared.
import { api } from "../api.js";
import { LiveClient, runSocketUrl } from "../live.js";
import { applyEvents, applyProgress, initialState, mergeSnapshot, progress } from "../transforms/events.js";
import { rowChanges } from "../transforms/rows.js";
import { stratifyRows } from "../transforms/stratify.js";
import { bestSoFar } from "../transforms/timeline.js";
import { format, progressLine, statusLabel, vendorComparison } from "../transforms/runs.js";
import { formatPercent, metricDeltas } from "../transforms/deltas.js";
import { defaultQuery, matchingIds } from "../transforms/nodeTable.js";
import { generationChain } from "../transforms/generation.js";
import { renderAttemptInspector } from "./attemptInspector.js";
import { TimelineView } from "./charts.js";
import { facts, fill, h } from "./dom.js";
import { renderInspector } from "./inspector.js";
import { legend, timelineLegend } from "./legend.js";
import { NodeTable } from "./nodeTable.js";
import { TreeView } from "./tree.js";

// The REST safety net (the database is the truth): every few seconds while the socket is
// down, and now and then while it is up, in case a notification was lost.
const POLL_MS = 4000;
const POLL_WHILE_LIVE_MS = 30000;

/** Where a session's data comes from: a signed-in user's run, or a share link. */
/** @returns {SessionSource} */
export function runSource(runId) {
  const base = `/api/runs/${runId}`;
  return {
    readOnly: false,
    async load() {
      const [run, nodes] = await Promise.all([api(`${base}/`), api(`${base}/nodes/`)]);
      return { run, nodes, lastSeq: run.last_seq ?? 0 };
    },
    node: (id) => api(`${base}/nodes/${id}/`),
    events: (after) => api(`${base}/events/?after=${after}`),
    socketUrl: (after) => runSocketUrl(runId, after),
    control: (action) => api(`${base}/${action}/`, { method: "POST" }),
    share: () => api(`${base}/shares/`, { method: "POST" }),
    unshare: (shareId) => api(`${base}/shares/${shareId}/`, { method: "DELETE" }),
    exportUrl: `${base}/export/`,
    tableUrls: { csv: `${base}/nodes.csv`, json: `${base}/nodes.json` },
  };
}

/** @returns {SessionSource} */
export function sharedSource(token) {
  const base = `/api/shared/${encodeURIComponent(token)}`;
  let runId = null;
  return {
    readOnly: true,
    async load() {
      const { run, nodes } = await api(`${base}/`);
      runId = run.id;
      return { run, nodes, lastSeq: run.last_seq ?? 0 };
    },
    node: (id) => api(`${base}/nodes/${id}/`),
    events: (after) => api(`${base}/events/?after=${after}`),
    socketUrl: (after) => runSocketUrl(runId, after, token),
    control: null,
    share: null,
    unshare: null,
    exportUrl: null,
    tableUrls: { csv: `${base}/nodes.csv`, json: `${base}/nodes.json` },
  };
}

/**
 * @typedef {{readOnly: boolean, load: () => Promise<{run: any, nodes: any[], lastSeq: number}>,
 *   node: (id: number) => Promise<any>, events: ((after: number) => Promise<any[]>)|null,
 *   socketUrl: (after: number) => string, control: ((action: string) => Promise<any>)|null,
 *   share: (() => Promise<any>)|null, unshare: ((shareId: number) => Promise<any>)|null,
 *   exportUrl: string|null, tableUrls: {csv: string, json: string}}} SessionSource
 */

/**
 * @param {HTMLElement} root
 * @param {SessionSource} source
 */
export async function mountSession(root, source) {
  fill(root, h("p", { class: "loading" }, "Loading the run…"));
  const snapshot = await source.load();
  let state = initialState(snapshot);
  let why = snapshot.run.why ?? [];
  // How the root was written from an intent: the tree's first nodes (null: it was not).
  const generation = generationChain(snapshot.run.generation);
  const ui = { selectedId: /** @type {number|null} */ (null), selectedAttempt: /** @type {number|null} */ (null), expanded: new Set(), collapsed: new Set(), collapseFailed: true };
  let lastMessageAt = 0, lastPollAt = 0, liveStatus = "connecting";

  const el = {
    header: h("header", { class: "session-header" }),
    progress: h("div", { class: "progress-panel", "aria-live": "polite" }),
    tree: h("div", { class: "tree-holder" }),
    timeline: h("div", { class: "timeline-holder" }),
    table: h("section", { class: "panel node-table-panel", "aria-label": "nodes" }),
    why: h("section", { class: "why panel" }),
    inspector: h("aside", { class: "inspector panel", "aria-label": "node inspector" },
      h("p", { class: "muted" }, "Click a node to see its kernel, diagnosis and measurements.")),
    share: h("div", { class: "share-result" }),
    status: h("span", { class: "live-status" }),
  };
  const foldToggle = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", checked: true, onchange: (e) => {
    ui.collapseFailed = e.target.checked;
    ui.expanded.clear();
    scheduleRender();
  } }));
  fill(root,
    snapshot.run.demo ? h("p", { class: "notice demo-banner", role: "note", "data-demo": "" }, snapshot.run.demo.banner) : null,
    el.header,
    source.readOnly ? h("p", { class: "notice" }, "A shared, read-only view of this run.")
      : snapshot.run.imported ? [h("p", { class: "notice imported-notice" },
        "Imported from an exported trajectory: a complete record, read-only; nobody drives it."),
      snapshot.run.can_share ? controls({ drive: false }) : null]
        : snapshot.run.can_control === false ? h("p", { class: "notice" }, "You can watch this run; its owner controls it.") : controls(),
    el.progress,
    h("div", { class: "session-grid" },
      h("div", { class: "session-main" },
        h("section", { class: "panel tree-panel" },
          h("div", { class: "toolbar" },
            h("h2", null, "Search tree"),
            h("button", { type: "button", onclick: () => treeView.fit() }, "Fit"),
            h("label", null, foldToggle, " fold failed"),
            legend({ generation: generation != null }), el.status),
          el.tree),
        el.table,
        h("section", { class: "panel" }, h("h2", null, "Best time so far"), el.timeline, timelineLegend()),
        el.why),
      el.inspector));

  const treeView = new TreeView(el.tree, {
    width: Math.max(400, Math.round(el.tree.clientWidth || 900)), height: 520,
    onSelect: (id) => select(id),
    onToggleFailed: (parentId) => toggle(ui.expanded, parentId),
    onToggleCollapse: (id) => toggle(ui.collapsed, id),
    onSelectAttempt: (index) => selectAttempt(index),
  });

  const timeline = new TimelineView(el.timeline, { onSelect: (id) => select(id) });
  let query = defaultQuery();
  const nodeTable = new NodeTable(el.table, { onSelect: (id) => select(id),
    onQuery: (next) => { query = next; scheduleRender(); }, downloads: source.tableUrls });
  let rowsVersion = 0;
  // What the table's search matches, highlighted in the tree: worked out again only when
  // the rows or the search changed.
  let matched = { key: "", ids: /** @type {Set<number>|null} */ (null) };
  function matches() {
    const key = JSON.stringify([rowsVersion, query.text, query.status, query.level]);
    if (key !== matched.key) matched = { key, ids: matchingIds(state.rows.values(), query) };
    return matched.ids;
  }

  function toggle(set, id) {
    if (set.has(id)) set.delete(id);
    else set.add(id);
    scheduleRender();
  }

  let frame = 0;
  function scheduleRender() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      render();
    });
  }

  // The last rows drawn, and their hierarchy: an event that changes no node's place in
  // the tree (an evaluation that passed, say) redraws with the same hierarchy, which the
  // tree view takes as "the same layout" and only repaints the nodes that changed.
  let drawnRows = null, drawnBudget = undefined, drawnVendor = undefined;
  let tree = stratifyRows([]);
  function render() {
    const changed = rowChanges(drawnRows, state.rows);
    if (drawnRows !== state.rows) rowsVersion++; // the table re-sorts only when some row changed
    drawnRows = state.rows;
    if (changed.shape) tree = stratifyRows(state.rows.values());
    treeView.render({ root: tree.root, rows: state.rows, run: state.run, selectedId: ui.selectedId,
      expanded: ui.expanded, collapsed: ui.collapsed, collapseFailed: ui.collapseFailed, matches: matches(),
      generation, selectedAttempt: ui.selectedAttempt });
    nodeTable.render(state.rows.values(), ui.selectedId, rowsVersion,
      { bestMs: state.run.best_ms ?? null, margin: state.run.promote_margin ?? null });
    renderHeader();
    renderProgress(tree.waiting.length);
    if (changed.measured || state.run.budget !== drawnBudget || (state.run.vendor_ms ?? null) !== drawnVendor) {
      drawnBudget = state.run.budget;
      drawnVendor = state.run.vendor_ms ?? null; // pushed once the run's GPU is known
      timeline.render(bestSoFar(state.rows.values()), { budget: drawnBudget ?? null,
        vendorMs: state.run.vendor_ms ?? null, floorMs: state.run.floor_ms ?? null });
    }
    renderWhy();
  }

  // A panel is rebuilt only when what it shows changed: most events change none of them
  // but the progress line, and a rebuild costs the page a restyle and relayout.
  const shown = new WeakMap();
  function changedSince(panel, key) {
    if (shown.get(panel) === key) return false;
    shown.set(panel, key);
    return true;
  }

  function renderHeader() {
    const run = state.run;
    const overVendor = vendorComparison(run);
    if (!changedSince(el.header, JSON.stringify([run.id, run.task, run.status, run.judge, run.root_ms, run.best_ms,
      run.speedup, overVendor, run.gpu_seconds, run.created_by, run.message, run.outcome, run.intent,
      run.imported, run.queued_since]))) return;
    fill(el.header,
      h("h1", null, `Run #${run.id} `, h("span", { class: "task" }, run.task ?? ""), " ",
        h("span", { class: `badge status-${run.status} outcome-${run.outcome || "none"}${run.queued_since ? " queued" : ""}`,
          "data-run-status": run.status, "data-queued": run.queued_since ? "gpu" : "", "data-outcome": run.outcome ?? "" },
        statusLabel(run))),
      run.imported ? h("span", { class: "badge imported", "data-imported": "" }, "imported") : null,
      run.message ? h("p", { class: "run-message", "data-run-message": "" }, run.message) : null,
      run.intent ? h("p", { class: "run-intent", "data-run-intent": "" }, h("span", { class: "muted" }, "Intent: "), run.intent) : null,
      facts([["judge", run.judge], ["root", format.ms(run.root_ms)], ["best", format.ms(run.best_ms)],
        ["speedup", format.speedup(run.speedup ?? (run.root_ms && run.best_ms ? run.root_ms / run.best_ms : null))],
        overVendor ? ["vs vendor", overVendor] : null, ["GPU time", format.seconds(run.gpu_seconds)], ["by", run.created_by ?? null]], "facts inline"));
    for (const button of root.querySelectorAll("[data-action]")) {
      const action = /** @type {HTMLElement} */ (button).dataset.action;
      /** @type {HTMLButtonElement} */ (button).disabled = !allowed(action, run.status);
    }
  }

  function renderProgress(waiting) {
    const p = progress(state);
    if (!changedSince(el.progress, JSON.stringify([p.budget, p.evaluated, p.pending, p.nodes, waiting,
      state.run.status, state.run.queue]))) return;
    fill(el.progress,
      h("progress", { max: p.budget ?? 1, value: p.evaluated, "aria-label": "evaluations" }),
      h("span", { class: "progress-text", "data-evaluated": p.evaluated },
        progressLine(p, { status: state.run.status, imported: Boolean(state.run.imported), waiting,
          perMinute: state.run.queue?.per_minute ?? null, minutesLeft: state.run.queue?.minutes_left ?? null,
          underWay: state.run.queue?.under_way ?? 0, queued: state.run.queue?.queued ?? 0,
          queuedAhead: state.run.queue?.queued_ahead ?? 0, measuring: state.run.queue?.measuring ?? 0 })));
  }

  function renderWhy() {
    if (!changedSince(el.why, JSON.stringify([why, why.length ? null : state.run.status]))) return;
    if (!why.length) return fill(el.why, h("h2", null, "Why it is faster"),
      h("p", { class: "muted" }, state.run.status === "running" ? "No faster kernel yet." : "No candidate beat the starting kernel."));
    fill(el.why, h("h2", null, "Why it is faster"), h("ol", { class: "why-steps" }, why.map((step) => h("li", null,
      h("button", { type: "button", class: "link", onclick: () => select(step.to) }, `#${step.from} → #${step.to}`), " ",
      h("strong", null, step.change?.title ?? ""), ` (${step.change?.source ?? "?"}): `,
      `${format.ms(step.time_before_ms)} → ${format.ms(step.time_after_ms)}`,
      step.speedup ? ` (${format.speedup(step.speedup)})` : "",
      step.diagnosis ? h("div", { class: "muted" }, `${step.diagnosis.bottleneck}: ${step.diagnosis.summary}`) : null,
      step.metric_deltas?.length ? h("div", { class: "muted" }, metricDeltas(Object.fromEntries(step.metric_deltas.map((d) => [d.metric, d.ratio])))
        .map((d) => `${d.metric} ${formatPercent(d.percent)}`).join(", ")) : null))));
  }

  let inspecting = 0;
  async function select(id) {
    if (id == null) return;
    ui.selectedId = id;
    ui.selectedAttempt = null;
    history.replaceState(null, "", `#node-${id}`);
    scheduleRender();
    const ticket = ++inspecting;
    el.inspector.classList.add("loading");
    try {
      const detail = await source.node(id);
      if (ticket !== inspecting) return; // another node was clicked meanwhile
      renderInspector(el.inspector, detail, { row: state.rows.get(id), onSelect: select });
      el.inspector.dataset.nodeId = String(id);
    } catch (error) {
      if (ticket === inspecting) fill(el.inspector, h("p", { class: "error" }, `Could not load node #${id}: ${error.message}`));
    } finally {
      if (ticket === inspecting) el.inspector.classList.remove("loading");
    }
  }

  /** One of the tree's first nodes: an attempt at the first kernel (-1: the intent). */
  function selectAttempt(index) {
    if (!generation) return;
    ui.selectedAttempt = index;
    ui.selectedId = null;
    inspecting++; // a node still loading does not replace it
    history.replaceState(null, "", index === -1 ? "#intent" : `#attempt-${index + 1}`);
    scheduleRender();
    el.inspector.classList.remove("loading");
    delete el.inspector.dataset.nodeId;
    renderAttemptInspector(el.inspector, generation, index, { onSelectAttempt: selectAttempt,
      onSelectRoot: () => select(rootId()) });
  }

  function rootId() {
    for (const row of state.rows.values()) if (row.parentId == null) return row.id;
    return null;
  }

  function receive(events) {
    lastMessageAt = Date.now();
    const before = state;
    const selectedBefore = ui.selectedId == null ? null : state.rows.get(ui.selectedId)?.state;
    const result = applyEvents(state, events);
    state = result.state;
    if (result.gap) live.resync(); // the server replays from our last seq
    if (state === before) return;
    scheduleRender();
    if (ui.selectedId != null && selectedBefore !== state.rows.get(ui.selectedId)?.state) select(ui.selectedId);
    if (before.run.status !== state.run.status && ["finished", "stopped", "failed"].includes(state.run.status)) refresh();
  }

  /** The run's progress, pushed by the server (rate, time left, GPU time, workers, queue). */
  function receiveProgress(data) {
    lastMessageAt = Date.now();
    state = applyProgress(state, data);
    scheduleRender();
  }

  async function refresh() {
    // Backpropagation changes visits up the tree without an event per node; at the end,
    // take the stored rows (and the "why" story) once.
    const fresh = await source.load();
    state = mergeSnapshot(state, fresh);
    why = fresh.run.why ?? why;
    scheduleRender();
  }

  const live = new LiveClient({
    url: (after) => source.socketUrl(after),
    lastSeq: () => state.lastSeq,
    onEvents: receive,
    onSynced: () => { lastMessageAt = Date.now(); },
    onMessage: (message) => {
      if (message.type === "progress") receiveProgress(message.data);
      else console.error(new Error(`an unknown websocket message type ${JSON.stringify(message.type)}`));
    },
    onStatus: (status) => {
      liveStatus = status;
      el.status.textContent = { connecting: "connecting…", open: "live", synced: "live", retrying: "reconnecting…",
        refused: "live updates refused", stopped: "" }[status];
      el.status.dataset.status = status;
    },
    onError: (error) => console.error(error),
  });
  live.start();

  const poll = setInterval(async () => {
    if (!source.events || document.hidden || !["running", "paused"].includes(state.run.status)) return;
    const quiet = Date.now() - Math.max(lastMessageAt, lastPollAt);
    if (quiet < (liveStatus === "synced" ? POLL_WHILE_LIVE_MS : POLL_MS)) return;
    lastPollAt = Date.now();
    try {
      receive(await source.events(state.lastSeq));
    } catch (error) {
      console.error(error);
    }
  }, POLL_MS);

  /** @param {{drive?: boolean}} [options] drive: pause, resume and stop (not for an import) */
  function controls({ drive = true } = {}) {
    const control = /** @type {NonNullable<SessionSource["control"]>} */ (source.control);
    const act = (action) => async () => {
      try {
        const run = await control(action);
        if (run?.status) state = { ...state, run: { ...state.run, status: run.status } };
        scheduleRender();
      } catch (error) {
        alert(`Could not ${action} the run: ${error.message}`);
      }
    };
    return h("div", { class: "controls" },
      drive ? [h("button", { type: "button", "data-action": "pause", onclick: act("pause") }, "Pause"),
        h("button", { type: "button", "data-action": "resume", onclick: act("resume") }, "Resume"),
        h("button", { type: "button", "data-action": "stop", class: "danger", onclick: act("stop") }, "Stop")] : null,
      h("button", { type: "button", "data-action": "share", onclick: share }, "Share link"),
      source.exportUrl ? h("a", { class: "button", href: source.exportUrl, download: "" }, "Export JSON") : null,
      el.share);
  }

  async function share() {
    const create = /** @type {NonNullable<SessionSource["share"]>} */ (source.share);
    const revoke = /** @type {NonNullable<SessionSource["unshare"]>} */ (source.unshare);
    try {
      const link = await create();
      const url = new URL(link.url ?? `/share/${link.token}/`, window.location.origin).href;
      const input = h("input", { type: "text", readonly: true, value: url, class: "share-url", "aria-label": "share link" });
      fill(el.share, input,
        h("button", { type: "button", onclick: () => navigator.clipboard?.writeText(url) }, "Copy"),
        h("button", { type: "button", class: "danger", onclick: async () => {
          await revoke(link.id);
          fill(el.share, h("span", { class: "muted" }, "Link revoked."));
        } }, "Revoke"));
    } catch (error) {
      fill(el.share, h("span", { class: "error" }, `Could not share: ${error.message}`));
    }
  }

  render();
  const fromHash = /^#node-(\d+)$/.exec(window.location.hash);
  const attemptFromHash = /^#(?:attempt-(\d+)|intent)$/.exec(window.location.hash);
  if (fromHash) select(Number(fromHash[1]));
  else if (attemptFromHash) selectAttempt(attemptFromHash[1] ? Number(attemptFromHash[1]) - 1 : -1);
  return {
    get state() { return state; },
    stop() { live.stop(); clearInterval(poll); },
  };
}

function allowed(action, status) {
  if (action === "pause") return status === "running";
  if (action === "resume") return status === "paused";
  if (action === "stop") return status === "running" || status === "paused";
  return true;
}

// The browser half of bench/browser_live.py: playwright-core driving Debian's Chromium,
// with the page instrumented from outside (an init script; the app is not changed).
//
//   node bench/browser_live.mjs '<json config>'
//
// config: {mode: "live" | "big", url, pages?, chromium?, expect?, zoom_steps?}. Talks to its parent on
// stdout: "# ..." progress, "READY" once the page(s) are drawn and live (the parent then
// starts committing events), "RESULT <json>" with what each page recorded. Every page
// time is epoch milliseconds on this machine's clock (performance.timeOrigin +
// performance.now()), the clock the parent's time.time() reads.
import { createRequire } from "node:module";

const require = createRequire(new URL("../frontend/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const config = JSON.parse(process.argv[2] ?? "{}");
const WAIT_MS = 120_000;
// The flags Chromium needs on a machine with no network and no GPU (as tests/e2e).
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const VIEWPORT = { width: 1440, height: 1000 };

const log = (...parts) => console.log("#", ...parts);

/**
 * Runs in the page before the app: records when each tree node's element first shows up
 * and first shows its evaluated state (a MutationObserver), when that frame was drawn
 * (the first task after the frame's rendering update: style, layout and paint are done),
 * when each event's websocket frame arrived, and how long the requestAnimationFrame
 * callback that changed it (the app renders in one) took.
 */
function instrument() {
  const clock = () => performance.timeOrigin + performance.now();
  const bench = {
    nodes: {}, // id -> {added: [dom, painted], done: [dom, painted, render_ms]}
    ws: {}, // seq -> arrival of the frame holding it
    batches: [], // observer calls that saw new or newly evaluated nodes: {dom, painted, added, render_ms}
    skew: [], // (timeOrigin + now) - Date.now() at samples, ms (Date.now() has 1 ms steps)
    changes: [], // times of `change` events (the fold toggle)
    frames: null, // during a zoom: {t: frame begin, start, end: the task after its paint, k}
    wheels: [], // during a zoom: [event created, handled, drawn]
    longtasks: [],
  };
  window.__bench = bench;

  const queue = [];
  const channel = new MessageChannel();
  channel.port1.onmessage = () => queue.shift()();
  const nextTask = (callback) => {
    queue.push(callback);
    channel.port2.postMessage(0);
  };
  const nativeRaf = window.requestAnimationFrame.bind(window);
  bench.nativeRaf = nativeRaf;
  let inFrame = false;
  let lastRender = 0;
  window.requestAnimationFrame = (callback) => nativeRaf((t) => {
    const start = clock();
    inFrame = true;
    try {
      callback(t);
    } finally {
      lastRender = clock() - start;
      nextTask(() => { inFrame = false; });
    }
  });
  // Within a frame's rendering update (after a rAF callback) the next task comes after
  // paint; outside one (a render on a task of its own), after the next frame's.
  const afterPaint = (callback) => (inFrame ? nextTask(callback) : nativeRaf(() => nextTask(callback)));
  bench.afterPaint = afterPaint;
  bench.nextTask = nextTask;
  bench.clock = clock;
  bench.observer_ms = [];

  // Class changes only: the tree sets a node element's class once it is in the layer (so a
  // new element shows up here too) and whenever what it shows changes; its text and
  // position changes are not observed, to keep this observer cheap (its cost is reported).
  const observer = new MutationObserver((records) => {
    const before = Date.now();
    const t = clock();
    const after = Date.now();
    const render = inFrame ? lastRender : null;
    const added = [];
    const done = [];
    for (const record of records) {
      const el = record.target;
      let seen = el.__benchSeen;
      if (seen?.done) continue;
      if (!seen) {
        if (el.localName !== "g" || !el.classList.contains("node")) continue;
        const id = el.getAttribute("data-id");
        if (id == null) continue;
        seen = el.__benchSeen = bench.nodes[id] ??= {};
      }
      if (!seen.added) {
        seen.added = [t, null];
        added.push(seen);
      }
      if (!seen.done && (el.classList.contains("passed") || el.classList.contains("failed"))) {
        seen.done = [t, null, render];
        done.push(seen);
      }
    }
    if (!added.length && !done.length) return;
    const batch = { dom: t, painted: null, added: added.length, render_ms: render };
    bench.batches.push(batch);
    // A sample only when nothing came between the reads (on a busy machine the renderer
    // may be descheduled there): the clocks' agreement, not the scheduler's, is wanted.
    if (done.length && after - before <= 1 && bench.skew.length < 2000) bench.skew.push(t - (before + after) / 2);
    afterPaint(() => {
      const painted = clock();
      for (const seen of added) seen.added[1] ??= painted;
      for (const seen of done) seen.done[1] ??= painted;
      batch.painted = painted;
    });
    bench.observer_ms.push([clock() - t, records.length]); // this observer's own cost, inside the measured span
  });
  observer.observe(document, { subtree: true, attributes: true, attributeFilter: ["class"] });

  const NativeWebSocket = window.WebSocket;
  window.WebSocket = class extends NativeWebSocket {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (message) => {
        const t = clock();
        try {
          const frame = JSON.parse(message.data);
          if (frame.type === "events") for (const event of frame.data) bench.ws[event.seq] ??= t;
        } catch {
          // not ours to judge: the app reports it
        }
      });
    }
  };
  document.addEventListener("change", () => bench.changes.push(clock()), true);
  // Zoom: each wheel event's creation, and the frame that drew what its handler did.
  document.addEventListener("wheel", (event) => {
    if (!bench.frames) return;
    const wheel = [performance.timeOrigin + event.timeStamp, clock(), null];
    bench.wheels.push(wheel);
    afterPaint(() => { wheel[2] = clock(); });
  }, { capture: true, passive: true });
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        bench.longtasks.push([performance.timeOrigin + entry.startTime, entry.duration]);
      }
    }).observe({ type: "longtask", buffered: true });
  } catch {
    // no longtask entries in this browser
  }
}

const browser = await chromium.launch({ executablePath: config.chromium ?? "/usr/bin/chromium", args: ARGS });
const pageErrors = [];
try {
  const result = config.mode === "big" ? await big() : await live();
  result.browser_version = browser.version();
  result.page_errors = pageErrors;
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

/**
 * A page of its own browser context (window), instrumented. Not all in one context: in
 * this headless Chromium, of the pages of one context only the last opened drew promptly;
 * in the others a requestAnimationFrame waited 0.5 to 1 s once they had been idle a
 * moment. Each viewer of the live rounds stands for a person with a window of their own.
 */
async function newPage(label) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  await context.addInitScript(instrument);
  const page = await context.newPage();
  watch(page, label);
  return page;
}

/** `pages` viewers of a share link; the parent drives the run once all are live. */
async function live() {
  const pages = [];
  for (let i = 0; i < (config.pages ?? 1); i += 1) {
    const page = await open(config.url, `viewer ${i}`);
    await page.waitForSelector('.live-status[data-status="synced"]', { timeout: WAIT_MS });
    pages.push(page);
  }
  log(`${pages.length} page(s) live`);
  console.log("READY");
  const deadline = Date.now() + (config.run_timeout_ms ?? 600_000);
  for (const page of pages) {
    await page.waitForSelector('[data-run-status="finished"]', { timeout: Math.max(1, deadline - Date.now()) });
  }
  await pages[0].waitForTimeout(1000); // the last refresh after run_finished
  const recorded = [];
  for (const page of pages) recorded.push(await collect(page));
  return { pages: recorded };
}

/**
 * A run of many nodes: its first draw, then (the parent commits `expect` new nodes, one
 * at a time) the redraw of each, then zoom frames; then the failed nodes unfolded (all
 * drawn) and zoom frames again.
 */
async function big() {
  const page = await open(config.url, "big");
  await page.waitForFunction(() => window.__bench.batches.some((b) => b.painted), null, { timeout: WAIT_MS });
  await page.waitForSelector('.live-status[data-status="synced"]', { timeout: WAIT_MS });
  const first = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const api = performance.getEntriesByType("resource").filter((r) => r.name.includes("/api/shared/"));
    const batch = window.__bench.batches[0];
    const since = (t) => (t == null ? null : t - performance.timeOrigin);
    return {
      drawn_elements: document.querySelectorAll("svg.tree g.node").length,
      first_batch_elements: batch.added,
      dom_content_loaded_ms: nav?.domContentLoadedEventEnd ?? null,
      api_response_end_ms: api.length ? Math.max(...api.map((r) => r.responseEnd)) : null,
      api_bytes: api.reduce((sum, r) => sum + (r.transferSize || r.encodedBodySize || 0), 0),
      tree_in_dom_ms: since(batch.dom),
      painted_ms: since(batch.painted),
      longest_task_ms: Math.max(0, ...window.__bench.longtasks.map(([, d]) => d)),
    };
  });
  log("first draw", JSON.stringify(first));
  console.log("READY");
  const wanted = config.expect ?? [];
  await page.waitForFunction((ids) => ids.every((id) => window.__bench.nodes[id]?.done?.[1]), wanted,
    { timeout: WAIT_MS, polling: 200 });
  const grown = await collect(page);
  log("grown");

  const zoomFolded = await zoomFrames(page);
  log("zoomed (failed folded)");

  const before = await page.evaluate(() => window.__bench.batches.length);
  await page.locator(".toolbar input[type=checkbox]").uncheck();
  await page.waitForFunction((n) => window.__bench.batches.length > n && window.__bench.batches.at(-1).painted, before,
    { timeout: WAIT_MS });
  const unfold = await page.evaluate(() => {
    const b = window.__bench;
    const batch = b.batches.at(-1);
    return { input_to_painted_ms: batch.painted - b.changes.at(-1), render_ms: batch.render_ms,
      added_elements: batch.added, drawn_elements: document.querySelectorAll("svg.tree g.node").length };
  });
  log("unfolded", JSON.stringify(unfold));
  await page.click(".toolbar button:has-text('Fit')");
  await page.waitForTimeout(300);
  const zoomAll = await zoomFrames(page);
  log("zoomed (all drawn)");
  return { first_draw: first, grown, zoom_failed_folded: zoomFolded, unfold_failed: unfold, zoom_all_drawn: zoomAll };
}

/**
 * Mouse-wheel zoom over the tree's centre, one notch a frame: `steps` in, then one fewer
 * out (a notch past the zoom's limit is not taken by d3-zoom and would scroll the page).
 * Records each frame's begin time (the rAF time) and the end of its main-thread work (the
 * task after its rendering update), and each wheel event's creation to its drawn frame.
 */
async function zoomFrames(page, steps = config.zoom_steps ?? 20) {
  const tree = page.locator("svg.tree");
  await tree.scrollIntoViewIfNeeded();
  const box = await tree.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.evaluate(() => {
    const b = window.__bench;
    b.frames = [];
    b.wheels = [];
    const tick = (t) => {
      if (!b.frames) return;
      const entry = { t: performance.timeOrigin + t, start: b.clock(), end: null,
        k: document.querySelector("svg.tree g.viewport")?.getAttribute("transform") ?? "" };
      b.frames.push(entry);
      b.nextTask(() => { entry.end = b.clock(); }); // a rAF callback: the next task follows this frame's paint
      b.nativeRaf(tick);
    };
    b.nativeRaf(tick);
  });
  const nextFrame = () => page.evaluate(() => new Promise((resolve) => window.__bench.nativeRaf(() => resolve(null))));
  await nextFrame();
  for (const delta of [...Array(steps).fill(-120), ...Array(steps - 1).fill(120)]) {
    await page.mouse.wheel(0, delta);
    await nextFrame();
  }
  await nextFrame();
  await nextFrame();
  return page.evaluate(() => {
    const b = window.__bench;
    const frames = b.frames.filter((f) => f.end != null);
    b.frames = null;
    const intervals = frames.slice(1).map((f, i) => f.t - frames[i].t);
    const work = frames.map((f) => f.end - f.t);
    const scale = (transform) => Number(/scale\(([^)]+)\)/.exec(transform)?.[1] ?? NaN);
    const wheels = b.wheels.filter((w) => w[2] != null);
    return { frames: frames.length, interval_ms: intervals, work_ms: work,
      wheel_to_drawn_ms: wheels.map(([created, , drawn]) => drawn - created),
      wheel_handled_to_drawn_ms: wheels.map(([, handled, drawn]) => drawn - handled),
      scales: frames.map((f) => scale(f.k)).filter((k, i, all) => i === 0 || k !== all[i - 1]) };
  });
}

async function open(url, label) {
  const page = await newPage(label);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#app[data-ready]", { timeout: WAIT_MS });
  const state = await page.getAttribute("#app", "data-ready");
  if (state !== "true") throw new Error(`${label}: the page failed to start: ${await page.textContent("#app")}`);
  return page;
}

async function collect(page) {
  return page.evaluate(() => {
    const b = window.__bench;
    return { nodes: b.nodes, ws: b.ws, skew_ms: b.skew, observer_ms: b.observer_ms,
      longtasks: b.longtasks, time_origin: performance.timeOrigin,
      drawn_elements: document.querySelectorAll("svg.tree g.node").length };
  });
}

function watch(page, label) {
  page.on("pageerror", (error) => pageErrors.push(`${label}: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") log(`console error (${label}): ${message.text()}`);
  });
}

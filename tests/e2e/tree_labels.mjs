// The browser half of test_explorer.py's tree-labels test: on a finished run of a few
// hundred nodes (E2E_RUN), at "Fit", reads every shown tree label's box on screen;
// hovers a node that has no label; searches the node table (E2E_SEARCH) and reads what
// the tree marks, then clears the search. Prints "RESULT <json>"; exits non-zero on the
// first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

/** The tree's labels that are shown (not culled, not display:none), with their boxes on screen. */
function shownLabels() {
  return [...document.querySelectorAll("svg.tree text.label")]
    .filter((text) => getComputedStyle(text).display !== "none")
    .map((text) => {
      const box = text.getBoundingClientRect();
      return { id: text.closest("g.node")?.getAttribute("data-id"), text: text.textContent,
        box: [box.left, box.top, box.right, box.bottom] };
    });
}

/** What the tree marks: node ids by class, whether it is searching, and how it dims. */
function marks() {
  const ids = (selector) => [...document.querySelectorAll(selector)].map((g) => g.getAttribute("data-id"));
  const unmatched = document.querySelector("svg.tree g.node.unmatched");
  return {
    searching: document.querySelector("svg.tree")?.classList.contains("searching") ?? false,
    match: ids("svg.tree g.node.match"), unmatched: ids("svg.tree g.node.unmatched"),
    holds_match: ids("svg.tree g.node.holds-match"),
    unmatched_opacity: unmatched ? Number(getComputedStyle(unmatched).opacity) : null,
    stubs: Object.fromEntries([...document.querySelectorAll('svg.tree g.node[data-id^="failed:"]')]
      .map((g) => [g.getAttribute("data-id"), g.querySelector("text.label")?.textContent ?? null])),
  };
}

/** A node with no label whose circle is what the pointer finds at its centre: [id, x, y]. */
function unlabelledUnderPointer() {
  for (const g of document.querySelectorAll("svg.tree g.node:not(.failed-stub)")) {
    if (g.querySelector("text.label")) continue;
    const box = /** @type {Element} */ (g.querySelector("circle")).getBoundingClientRect();
    // whole pixels: Chromium hit-tests there, and a circle under a pixel wide is missed
    const x = Math.round(box.left + box.width / 2), y = Math.round(box.top + box.height / 2);
    if (box.width < 3 || x < 0 || y < 0 || x > innerWidth || y > innerHeight) continue;
    if (document.elementFromPoint(x, y)?.closest("g.node") === g) return [g.getAttribute("data-id"), x, y];
  }
  return null;
}

const browser = await launch();
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  const run = env("E2E_RUN");
  await signIn(page, `/runs/${run}/`, new RegExp(`/runs/${run}/$`));
  await page.waitForFunction((count) => document.querySelectorAll("svg.tree g.node").length >= count,
    Number(env("E2E_NODES")), { timeout: WAIT_MS }).catch(() => {});
  result.tree_nodes = await page.locator("svg.tree g.node").count();
  result.tree_ids = await page.locator("svg.tree g.node").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-id")));

  console.log("fit");
  await page.locator("svg.tree").scrollIntoViewIfNeeded();
  await page.click(".toolbar button:has-text('Fit')");
  await page.waitForTimeout(300); // the zoom's transform and the labels placed after it
  result.fit_scale = await page.evaluate(() => {
    const m = /scale\(([\d.e-]+)\)/.exec(document.querySelector("svg.tree g.viewport")?.getAttribute("transform") ?? "");
    return m ? Number(m[1]) : 1;
  });
  result.fit_labels = await page.evaluate(shownLabels);
  result.fit_frame = await page.evaluate(() => {
    const box = /** @type {Element} */ (document.querySelector("svg.tree")).getBoundingClientRect();
    return [box.left, box.top, box.right, box.bottom];
  });
  // Each node's circle on screen (its CSS scale included): the smallest radius drawn.
  result.fit_min_radius = await page.evaluate(() => Math.min(...[...document.querySelectorAll("svg.tree g.node circle")]
    .map((c) => c.getBoundingClientRect().width / 2)));
  result.legend = await page.locator(".legend .legend-item").evaluateAll((items) => items.map((item) => item.textContent));
  await page.screenshot({ path: join(env("SHOTS_DIR"), "tree-labels-fit.png") });

  console.log("zoom in on a block size's node, and point at one without a label");
  // At Fit the circles are a few pixels wide and overlap: a person zooms in (the wheel) to point at one.
  const block = await page.locator('svg.tree g.node[data-id="6"] circle').boundingBox();
  if (!block) throw new Error("node #6 is not drawn");
  await page.mouse.move(block.x + block.width / 2, block.y + block.height / 2);
  for (let i = 0; i < 2; i++) {
    await page.mouse.wheel(0, -1000);
    await page.waitForTimeout(200);
  }
  const target = await page.evaluate(unlabelledUnderPointer);
  if (!target) throw new Error("no unlabelled node can be pointed at (is the tree in the viewport?)");
  const [hoveredId, x, y] = target;
  result.hovered_id = hoveredId;
  await page.mouse.move(x, y);
  const hoveredLabel = page.locator(`svg.tree g.node[data-id="${hoveredId}"] text.label:not(.culled)`);
  await hoveredLabel.waitFor({ timeout: 5_000 }).catch(() => {});
  result.hovered_label = (await page.evaluate(shownLabels)).find((label) => label.id === hoveredId) ?? null;
  await page.mouse.move(5, 5);
  await page.waitForTimeout(200);
  result.label_after_leaving = await page.locator(`svg.tree g.node[data-id="${hoveredId}"] text.label`).count();

  console.log("search");
  await page.click(".toolbar button:has-text('Fit')");
  await page.waitForTimeout(300);
  result.before_search = await page.evaluate(marks);
  await page.fill("input.node-search", env("E2E_SEARCH"));
  await page.locator("svg.tree.searching").waitFor({ timeout: 5_000 }).catch(() => {});
  await page.waitForTimeout(300);
  result.searching = await page.evaluate(marks);
  result.search_labels = await page.evaluate(shownLabels);
  await page.screenshot({ path: join(env("SHOTS_DIR"), "tree-search.png") });
  await page.fill("input.node-search", "");
  await page.waitForFunction(() => !document.querySelector("svg.tree.searching"), null, { timeout: 5_000 }).catch(() => {});
  result.cleared = await page.evaluate(marks);
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

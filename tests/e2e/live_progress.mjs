// The browser half of test_live_progress.py: open a run's page, say "WATCHING" (the test
// then drives the run in another process), and note every progress line, GPU time and
// "vs vendor" the page shows until the run ends, without reloading it. Prints "RESULT <json>"; exits
// non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const runId = env("RUN_ID");
const browser = await launch();
const result = { page_errors: [], lines: [], gpu_times: [], running_lines: [], running_gpu_times: [],
  running_vendor: [], navigations: 0 };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(page, `/runs/${runId}/`, new RegExp(`/runs/${runId}/$`));
  await page.locator(".progress-text").waitFor({ timeout: WAIT_MS });
  await page.waitForSelector('.live-status[data-status="synced"]', { timeout: WAIT_MS });
  // A mark on the window: a reload would lose it, and each navigation is counted.
  await page.evaluate(() => { window.__notReloaded = true; });
  page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) result.navigations += 1; });
  await page.screenshot({ path: join(env("SHOTS_DIR"), "progress-before.png"), fullPage: true });
  console.log("WATCHING");

  const started = Date.now();
  let shot = false;
  for (;;) {
    const seen = await page.evaluate(() => {
      const fact = (label) => [...document.querySelectorAll(".session-header dt")]
        .find((dt) => dt.textContent === label)?.nextElementSibling?.textContent ?? "";
      return { line: document.querySelector(".progress-text")?.textContent ?? "", gpu: fact("GPU time"),
        vendor: fact("vs vendor"),
        status: document.querySelector("[data-run-status]")?.getAttribute("data-run-status") ?? "" };
    });
    if (result.lines.at(-1) !== seen.line) result.lines.push(seen.line);
    if (result.gpu_times.at(-1) !== seen.gpu) result.gpu_times.push(seen.gpu);
    if (seen.status === "running") {
      if (result.running_lines.at(-1) !== seen.line) result.running_lines.push(seen.line);
      if (result.running_gpu_times.at(-1) !== seen.gpu) result.running_gpu_times.push(seen.gpu);
      if (result.running_vendor.at(-1) !== seen.vendor) result.running_vendor.push(seen.vendor);
      if (!shot && /candidates\/min/.test(seen.line)) {
        await page.screenshot({ path: join(env("SHOTS_DIR"), "progress-live.png"), fullPage: true });
        shot = true;
      }
    }
    if (["finished", "stopped", "failed"].includes(seen.status)) break;
    if (Date.now() - started > WAIT_MS * 2) throw new Error(`the run did not end: ${JSON.stringify(seen)}`);
    await page.waitForTimeout(50);
  }
  result.not_reloaded = await page.evaluate(() => window.__notReloaded === true);
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);

// The browser half of test_gpu_queue.py: on a server whose evaluator is the gate and that
// no GPU worker is connected to, New session says before a run starts that a run measured
// by a GPU worker would wait; the run started from it shows "queued for a GPU worker" once
// its first step finds no worker, and "running" once one beats, pushed over its socket with
// no reload. Says "WATCHING <run id>" and "QUEUED" for the test to step the run in another
// process. Prints "RESULT <json>"; exits non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [], navigations: 0 };
const badge = "[data-run-status]";
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(page, "/runs/new/?task=relu", /\/runs\/new\/\?task=relu$/);
  await page.waitForFunction(() => document.querySelector("#id_source").value.includes("fmaxf"), null,
    { timeout: WAIT_MS });
  await page.selectOption("#id_evaluator", "gate");
  const hint = page.locator("#evaluator-hint");
  result.gate_hint = await hint.textContent();
  result.gate_hint_warns = await hint.evaluate((el) => el.classList.contains("warning"));
  await page.screenshot({ path: join(env("SHOTS_DIR"), "gpu-queue-new-session.png"), fullPage: true });
  await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }),
    page.click("form.new-run button[type=submit]")]);
  result.run_id = Number(/\/runs\/(\d+)\/$/.exec(page.url())[1]);
  await page.waitForSelector('.live-status[data-status="synced"]', { timeout: WAIT_MS });
  result.before = await page.locator(badge).textContent();
  page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) result.navigations += 1; });
  console.log(`WATCHING ${result.run_id}`);

  await page.waitForSelector(`${badge}[data-queued="gpu"]`, { timeout: WAIT_MS });
  result.queued = await page.locator(badge).textContent();
  result.queued_message = await page.locator("[data-run-message]").textContent();
  await page.screenshot({ path: join(env("SHOTS_DIR"), "gpu-queue-run.png"), fullPage: true });
  console.log("QUEUED");

  await page.waitForSelector(`${badge}[data-queued=""]`, { timeout: WAIT_MS });
  result.after = await page.locator(badge).textContent();
  result.after_message = await page.locator("[data-run-message]").count();
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);

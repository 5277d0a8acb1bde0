// The browser half of test_explorer.py's intent test: on the New session page, ask the
// LLM (a scripted OpenAI-compatible server) to write the kernel from the intent. Each ask
// is a writing job a Celery worker runs while the page reads it; its attempts appear as
// rows (#writing-attempts). The first answer is a refusal, shown next to the intent with
// nothing typed lost; the second (nvcc refuses its first kernel, the repair compiles)
// fills the editor and the plan and names its writer. A run started from it, after an
// edit by hand, begins its tree with the intent and the refused attempt; clicking the
// attempt shows where it stopped, and the last attempt shows the edit. Prints "RESULT <json>".
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";
const INTENT = "relu over 2^28 floats, one coalesced pass";

const browser = await launch();
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));

  await signIn(page, "/runs/new/", /\/runs\/new\/$/);
  await page.selectOption("#id_task", "relu"); // the kernel is checked against the task chosen
  result.naive_source = await page.inputValue("#id_source");

  console.log("a refusal");
  await page.fill("#id_intent", INTENT);
  await page.click("#id_draft");
  const refused = page.locator("#errors-intent li").first();
  await refused.waitFor({ timeout: WAIT_MS });
  result.refusal = await refused.textContent();
  result.kept = (await page.inputValue("#id_intent")) === INTENT
    && (await page.inputValue("#id_source")) === result.naive_source;
  result.refused_rows = await page.locator("#writing-attempts li").allTextContents();

  console.log("a kernel");
  await page.click("#id_draft");
  await page.waitForFunction(() => document.querySelector("#drafted")?.textContent?.startsWith("Written by"),
    null, { timeout: WAIT_MS });
  result.drafted = await page.textContent("#drafted");
  result.source = await page.inputValue("#id_source");
  result.plan = JSON.parse(await page.inputValue("#id_plan"));
  result.errors_cleared = (await page.locator("#errors-intent li").count()) === 0;
  result.written_rows = await page.locator("#writing-attempts li").allTextContents();
  await page.screenshot({ path: join(env("SHOTS_DIR"), "draft-kernel.png"), fullPage: true });

  console.log("a run from it, edited by hand first");
  await page.fill("#id_source", `${result.source.trimEnd()}\n// tuned by hand\n`);
  await page.fill("#id_budget", "1");
  await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }),
    page.click("form.new-run button[type=submit]")]);
  await page.locator("svg.tree g.generation-node").first().waitFor({ timeout: WAIT_MS });
  result.chain_labels = await page.locator("svg.tree g.generation-node text").allTextContents();
  result.chain_before_root = await page.evaluate(() => {
    const x = (el) => el.getBoundingClientRect().x;
    const chain = [...document.querySelectorAll("svg.tree g.generation-node")].map((g) => x(g.firstElementChild));
    const root = document.querySelector('svg.tree g.node[data-id="0"] circle');
    return root != null && chain.every((v, i) => i === 0 || chain[i - 1] < v) && chain.at(-1) < x(root);
  });
  result.failed_colour = await page.locator("svg.tree g.generation-node.failed circle").first()
    .evaluate((c) => getComputedStyle(c).fill);
  result.legend_has_attempts = (await page.locator(".legend .legend-item.attempt-failed").count()) === 1;
  await page.locator('svg.tree g.generation-node[data-index="0"] circle').click();
  await page.locator(".inspector .attempt-header").waitFor({ timeout: WAIT_MS });
  result.attempt_header = (await page.textContent(".inspector .attempt-header h2"))?.trim();
  result.attempt_stage = await page.getAttribute(".inspector .attempt-header [data-stage]", "data-stage");
  result.attempt_message = await page.textContent(".inspector .attempt-message");
  // The last attempt (the kernel as written), from the intent's table: what was edited.
  await page.locator("svg.tree g.generation-node.intent rect, svg.tree g.generation-node.intent circle").first().click();
  await page.locator(".inspector table button").last().click();
  await page.locator('.inspector [data-section="edited"]').waitFor({ timeout: WAIT_MS });
  result.edited_notice = await page.textContent(".inspector .attempt-header .notice");
  result.edited_added = await page.locator('.inspector [data-section="edited"] .diff-add .text').allTextContents();
  await page.screenshot({ path: join(env("SHOTS_DIR"), "generation-nodes.png"), fullPage: true });
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

// The browser half of test_explorer.py's intent test: on the New session page, ask the
// LLM (a scripted OpenAI-compatible server) to write the kernel from the intent. Each ask
// is a writing job a Celery worker runs while the page reads it; its attempts appear as
// rows (#writing-attempts). The first answer is a refusal, shown next to the intent with
// nothing typed lost; the second fills the editor and the plan and names its writer.
// Prints "RESULT <json>".
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
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

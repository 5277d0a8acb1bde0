// The browser half of test_skeleton_card_page.py: the reviewer (E2E_USER, an admin) finds
// a skeleton card in the library, opens its page (the skeleton, its example as a
// side-by-side diff, its transfer trials) and approves it with a comment.
// Prints "RESULT <json>"; exits non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(page, "/skills/", /\/skills\/$/);
  await page.locator("a.skill-link").first().waitFor({ timeout: WAIT_MS });
  result.library_rows = await page.locator("a.skill-link").allTextContents();

  console.log("open the skeleton card");
  const link = page.locator("a.skill-link", { hasText: "skeleton contraction.smem_register_tile" });
  await Promise.all([page.waitForURL(/\/skills\/skeleton:contraction\.smem_register_tile\/$/), link.click()]);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await page.locator("#admission-trials").waitFor({ timeout: WAIT_MS });
  result.example_side_by_side = (await page.locator("#skeleton-example .d2h-file-side-diff").count()) >= 2;
  result.trials = await page.locator("#admission-trials tbody tr").count();
  result.preconditions = await page.locator("#skeleton-preconditions li").allTextContents();
  result.status_before = await page.textContent("#card-status");
  await page.screenshot({ path: join(env("SHOTS_DIR"), "skeleton-card.png"), fullPage: true });

  console.log("approve it");
  await page.fill("#review-comment", "the tile pays on every contraction we run");
  await page.click("#review-approve");
  await page.waitForFunction(() => document.querySelector("#card-status")?.textContent === "approved", null,
    { timeout: WAIT_MS });
  result.status_after = await page.textContent("#card-status");
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);

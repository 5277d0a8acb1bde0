// The browser half of test_explorer.py's skill review test: the reviewer (E2E_USER, an
// admin) opens the library, a card's page (its vector as a side-by-side diff, its
// pattern's holes marked), approves it with a comment and edits its notes; a member
// (E2E_MEMBER), in a browser context of their own, sees it approved with the review.
// Prints "RESULT <json>"; exits non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [] };
const shot = (page, name) => page.screenshot({ path: join(env("SHOTS_DIR"), `${name}.png`), fullPage: true });
try {
  const reviewer = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  reviewer.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(reviewer, "/skills/", /\/skills\/$/);
  await reviewer.locator("a.skill-link").first().waitFor({ timeout: WAIT_MS });
  result.library_rows = await reviewer.locator("a.skill-link").allTextContents();
  await shot(reviewer, "skills-library");

  console.log("open the card");
  await Promise.all([reviewer.waitForURL(/\/skills\/vec4-v1\/$/), reviewer.click("a.skill-link")]);
  await reviewer.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  result.side_by_side = (await reviewer.locator(".vector-diff .d2h-file-side-diff").count()) >= 2;
  result.holes = await reviewer.locator("mark.hole").allTextContents();

  console.log("approve it with a comment");
  await reviewer.fill("#review-comment", "float4 pays on row kernels");
  await reviewer.click("#review-approve");
  await reviewer.waitForFunction(() => document.querySelector("#card-status")?.textContent === "approved", null,
    { timeout: WAIT_MS });
  result.status_after_review = await reviewer.textContent("#card-status");

  console.log("edit its notes");
  await reviewer.click(".edit-box summary");
  await reviewer.fill("#edit-notes", "needs N % 4 == 0");
  await reviewer.click("#edit-save");
  await reviewer.waitForFunction(() => document.querySelectorAll("#versions > li").length === 2, null, { timeout: WAIT_MS });
  result.versions = await reviewer.locator("#versions > li").count();
  result.version_diff = await reviewer.textContent("#versions > li:nth-child(2) .version-diff");
  await shot(reviewer, "skill-card-approved");

  console.log("a member looks");
  const member = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  member.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(member, "/skills/vec4-v1/", /\/skills\/vec4-v1\/$/, env("E2E_MEMBER"), env("E2E_MEMBER_PASSWORD"));
  result.member_status = await member.textContent("#card-status");
  result.member_review = await member.textContent("#review-history");
  result.member_can_review = (await member.locator("#review-approve, #review-reject, #edit-save").count()) > 0;
  await shot(member, "skill-card-member");

  console.log("the card's lineage");
  await Promise.all([member.waitForURL(/\/lineages\/\d+\/$/), member.click("a.lineage-link")]);
  await member.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await member.locator("svg.tree g.node").first().waitFor({ timeout: WAIT_MS });
  result.lineage_url = member.url();
  result.lineage_nodes = await member.locator("svg.tree g.node").count();
  result.lineage_path = (await member.getAttribute("#app", "data-path")).split(",").map(Number);
  result.lineage_highlighted = (await member.locator("svg.tree g.node.on-best").evaluateAll(
    (nodes) => nodes.map((n) => Number(n.getAttribute("data-id"))))).sort((a, b) => a - b);
  await member.locator(`svg.tree g.node[data-id="${result.lineage_path[1]}"]`).click();
  result.lineage_step_title = await member.textContent("#lineage-step dl dd");
  await shot(member, "lineage");

  console.log("a risk's link");
  await member.goto(`${new URL(member.url()).origin}/skills/vec4-v1/`);
  await member.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await Promise.all([member.waitForURL(/\/lineages\/\d+\/#state=/), member.click("a.risk-link")]);
  await member.locator("#lineage-step h2").waitFor({ timeout: WAIT_MS });
  result.risk_opened_state = await member.textContent("#lineage-step h2");
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

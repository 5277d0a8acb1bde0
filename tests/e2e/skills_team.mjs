// The browser half of test_explorer.py's team library test. The team's admin (E2E_USER)
// chooses the team's library, copies the default library into it, opens the team's copy
// of a card and approves it; follows a search node made by that card to the card and the
// card's usage back to the run. A member (E2E_MEMBER), in a context of their own, has a
// default card open when a roundtrip's admission lands from another process (manage.py
// lineage admit, run here): the page shows the new status without a reload.
// Prints "RESULT <json>"; exits non-zero on the first failure.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { BASE, env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [] };
const shot = (page, name) => page.screenshot({ path: join(env("SHOTS_DIR"), `${name}.png`), fullPage: true });
const team = env("E2E_TEAM");
const run = env("E2E_RUN");
try {
  const admin = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  admin.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(admin, "/skills/", /\/skills\/$/);
  await admin.locator("a.skill-link").first().waitFor({ timeout: WAIT_MS });

  console.log("the team's library, empty, then copied from the default one");
  await admin.selectOption("#filter-team", team);
  await admin.locator(".skills-table p.empty").waitFor({ timeout: WAIT_MS });
  result.empty_notice = await admin.textContent(".skills-table p.empty");
  await admin.click("#copy-default");
  await admin.locator("a.skill-link").first().waitFor({ timeout: WAIT_MS });
  result.copy_message = await admin.textContent(".skill-message");
  result.team_rows = await admin.locator("a.skill-link").allTextContents();
  result.library_url = admin.url();
  await shot(admin, "skills-team-library");

  console.log("the team's copy of VEC4, approved by the team's admin");
  await Promise.all([admin.waitForURL(/\/skills\/vec4-v1\/\?team=\d+$/),
    admin.locator("a.skill-link", { hasText: "VEC4" }).click()]);
  await admin.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  result.team_card_status = await admin.textContent("#card-status");
  result.team_card_library = await admin.textContent(".crumbs a");
  result.copied_from = await admin.getAttribute("#copied-from", "href");
  result.effect_points = await admin.locator("svg.effects-chart circle.effect-point").count();
  await admin.fill("#review-comment", "holds on our row kernels");
  await admin.click("#review-approve");
  await admin.waitForFunction(() => document.querySelector("#card-status")?.textContent === "approved", null,
    { timeout: WAIT_MS });
  result.team_card_after = await admin.textContent("#card-status");
  await shot(admin, "skill-card-team");

  console.log("a node the card made links to the team's card, whose usage links back");
  await admin.goto(`${BASE}/runs/${run}/#node-1`);
  await admin.locator("a.skill-card-link").waitFor({ timeout: WAIT_MS });
  result.node_card_link = await admin.getAttribute("a.skill-card-link", "href");
  await Promise.all([admin.waitForURL(/\/skills\/vec4-v1\/\?team=\d+$/), admin.click("a.skill-card-link")]);
  await admin.locator("#usage a").first().waitFor({ timeout: WAIT_MS });
  result.usage_rows = await admin.locator("#usage tbody tr").count();
  await Promise.all([admin.waitForURL(new RegExp(`/runs/${run}/$`)), admin.locator("#usage a").first().click()]);
  result.back_at = new URL(admin.url()).pathname;

  console.log("a member watches a default card while its roundtrip's admission lands");
  const member = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  member.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(member, "/skills/fast_math-v1/", /\/skills\/fast_math-v1\/$/, env("E2E_MEMBER"), env("E2E_MEMBER_PASSWORD"));
  await member.locator("#card-live[data-status=open]").waitFor({ timeout: WAIT_MS });
  result.live_before = await member.textContent("#card-status");
  const started = Date.now();
  execFileSync(env("E2E_PYTHON"), ["manage.py", "lineage", "admit", env("E2E_ADMISSION")],
    { cwd: env("E2E_REPO"), env: JSON.parse(env("E2E_APP_ENV")), stdio: "inherit" });
  await member.waitForFunction(() => document.querySelector("#card-status")?.textContent === "verified", null,
    { timeout: WAIT_MS });
  result.live_seconds = (Date.now() - started) / 1000;
  result.live_after = await member.textContent("#card-status");
  result.live_notice = await member.textContent(".skill-message");
  result.member_reloaded = await member.evaluate(() => performance.getEntriesByType("navigation").length);
  await shot(member, "skill-card-live");
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

// The browser half of test_explorer.py's teams test: a person (E2E_USER) makes a team on
// /teams/, is refused an unknown name and a stranger's (E2E_MEMBER, in no team with them)
// with one message, invites the stranger by a link, which they open signed in and join;
// then makes them an admin, and they see the team with their new role. Then another link:
// a newcomer (E2E_NEWCOMER) opens it, signs up and lands on the first-run page. Prints
// "RESULT <json>"; exits non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [] };
try {
  const owner = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  owner.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(owner, "/teams/", /\/teams\/$/);
  result.empty = await owner.locator(".teams .muted").textContent();

  console.log("make a team");
  await owner.fill("#team-name", "attention kernels");
  await owner.click("form.team-create button[type=submit]");
  const panel = owner.locator('section.team[data-team="attention kernels"]');
  await panel.waitFor({ timeout: WAIT_MS });

  console.log("add someone who does not exist, and a stranger: one refusal");
  await panel.locator("input[name=username]").fill("nobody-here");
  await panel.locator("form.member-add button[type=submit]").click();
  result.refusal = await owner.locator(".team-errors li").first().textContent({ timeout: WAIT_MS });
  await panel.locator("input[name=username]").fill(env("E2E_MEMBER"));
  await panel.locator("form.member-add button[type=submit]").click();
  await owner.locator(".team-errors li", { hasText: `'${env("E2E_MEMBER")}'` }).waitFor({ timeout: WAIT_MS });
  result.stranger_refusal = await owner.locator(".team-errors li").first().textContent();

  console.log("invite the stranger by a link; signed in, they join as themselves");
  await panel.locator("button.invite").click();
  const colleagueLink = await panel.locator("input.invitation-url").inputValue({ timeout: WAIT_MS });
  const member = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  member.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(member, "/teams/", /\/teams\/$/, env("E2E_MEMBER"), env("E2E_MEMBER_PASSWORD"));
  await member.goto(colleagueLink);
  await Promise.all([member.waitForURL(/\/teams\/$/, { timeout: WAIT_MS }), member.click("main form button[type=submit]")]);
  await owner.reload();
  await owner.locator(`section.team button[data-remove="${env("E2E_MEMBER")}"]`).waitFor({ timeout: WAIT_MS });

  console.log("make them admin");
  await owner.selectOption(`select[aria-label="role of ${env("E2E_MEMBER")}"]`, "admin");
  await owner.waitForFunction((name) => document.querySelector(`select[aria-label="role of ${name}"]`)?.value === "admin",
    env("E2E_MEMBER"), { timeout: WAIT_MS });
  result.owner_rows = await owner.locator("section.team table.members tbody tr").allTextContents();
  await owner.screenshot({ path: join(env("SHOTS_DIR"), "teams.png"), fullPage: true });

  console.log("the colleague sees it");
  await member.reload();
  await member.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await member.locator('section.team[data-team="attention kernels"]').waitFor({ timeout: WAIT_MS });
  result.member_badge = await member.locator('section.team[data-team="attention kernels"] .badge').textContent();
  await member.screenshot({ path: join(env("SHOTS_DIR"), "teams-member.png"), fullPage: true });

  console.log("invite a newcomer by link; they sign up and land on the first-run page");
  await panel.locator("button.invite").click();
  const link = await panel.locator("input.invitation-url").inputValue({ timeout: WAIT_MS });
  await panel.locator("table.invitations tbody tr").first().waitFor({ timeout: WAIT_MS });
  result.open_invitations = await panel.locator("table.invitations tbody tr").count();
  await owner.screenshot({ path: join(env("SHOTS_DIR"), "teams-invitation.png"), fullPage: true });
  const newcomer = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  newcomer.on("pageerror", (error) => result.page_errors.push(error.message));
  await newcomer.goto(link);
  result.invitation_heading = await newcomer.locator("main h1").textContent();
  await newcomer.screenshot({ path: join(env("SHOTS_DIR"), "invitation.png"), fullPage: true });
  await newcomer.fill("input[name=username]", env("E2E_NEWCOMER"));
  await newcomer.fill("input[name=password1]", env("E2E_NEWCOMER_PASSWORD"));
  await newcomer.fill("input[name=password2]", env("E2E_NEWCOMER_PASSWORD"));
  await Promise.all([newcomer.waitForURL(/\/welcome\/$/, { timeout: WAIT_MS }), newcomer.click("main form button[type=submit]")]);
  result.welcome = await newcomer.locator("main").innerText();
  await newcomer.screenshot({ path: join(env("SHOTS_DIR"), "welcome.png"), fullPage: true });
  await newcomer.goto(link);
  result.reused_heading = await newcomer.locator("main h1").textContent();
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

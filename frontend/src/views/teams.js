// The teams page (/teams/): make a team, add colleagues by username or invite them by a
// link, set their roles, remove them or leave. The API decides who may (a team's admins
// manage it; anyone may leave; a team keeps an admin), and its refusals are shown next to
// the field.
import { api, ApiError } from "../api.js";
import { fieldErrors } from "../transforms/forms.js";
import { fill, h, table } from "./dom.js";

const ROLES = ["member", "reviewer", "admin"];

/** @param {HTMLElement} root */
export async function mountTeams(root) {
  const me = await api("/api/me/");
  const list = h("div", { class: "teams" });
  // One place for what the API refused (outside the list, which is redrawn after each change).
  const refused = h("ul", { class: "errors team-errors", "aria-live": "polite" });
  const name = /** @type {HTMLInputElement} */ (h("input", { id: "team-name", name: "name", maxlength: 100, required: true }));
  const errors = h("ul", { class: "errors", "data-errors-for": "name" });
  const create = h("form", { class: "team-create", onsubmit: async (/** @type {Event} */ event) => {
    event.preventDefault();
    await attempt(errors, async () => {
      await api("/api/teams/", { method: "POST", body: { name: name.value } });
      name.value = "";
      await load();
    });
  } }, h("label", { for: "team-name" }, "New team "), name, h("button", { type: "submit" }, "Create"), errors);
  fill(root, h("h1", null, "Teams"),
    h("p", { class: "lede" }, "A run or a declared task shared with a team is visible to its members, and so is the "
      + "team's skill library; its reviewers also approve, reject and edit the team's skill cards; its admins do all "
      + "that, pause, stop and share its runs, and manage who is in it."),
    create, refused, list);
  await load();

  async function load() {
    const teams = await api("/api/teams/");
    fill(list, teams.length ? teams.map((/** @type {any} */ team) => teamPanel(team, me.username, refused, load))
      : h("p", { class: "muted" }, "You are in no team yet: create one, then add your colleagues."));
  }
}

/**
 * @param {any} team
 * @param {string} me
 * @param {HTMLElement} errors
 * @param {() => Promise<void>} reload
 */
function teamPanel(team, me, errors, reload) {
  const admin = team.role === "admin";
  const username = /** @type {HTMLInputElement} */ (h("input", { name: "username", "aria-label": "username", required: true }));
  const role = roleSelect("member", "role of the new member");
  const base = `/api/teams/${team.id}/members/`;
  const rows = team.members.map((/** @type {any} */ m) => [
    h("span", { class: "member-name" }, m.username, m.username === me ? " (you)" : ""),
    admin ? roleSelect(m.role, `role of ${m.username}`, (value) => attempt(errors, async () => {
      await api(`${base}${encodeURIComponent(m.username)}/`, { method: "PATCH", body: { role: value } });
      await reload();
    }, reload)) : m.role,
    admin || m.username === me ? h("button", { type: "button", class: "danger", "data-remove": m.username, onclick: () =>
      attempt(errors, async () => {
        await api(`${base}${encodeURIComponent(m.username)}/`, { method: "DELETE" });
        await reload();
      }) }, m.username === me ? "Leave" : "Remove") : null]);
  return h("section", { class: "panel team", "data-team": team.name },
    h("h2", null, team.name, " ", h("span", { class: "badge" }, `you: ${team.role}`)),
    table(["member", "role", ""], rows, { class: "members" }),
    admin ? h("form", { class: "member-add", onsubmit: async (/** @type {Event} */ event) => {
      event.preventDefault();
      await attempt(errors, async () => {
        await api(base, { method: "POST", body: { username: username.value, role: /** @type {HTMLSelectElement} */ (role).value } });
        await reload();
      });
    } }, h("label", null, "Add by username ", username), role, h("button", { type: "submit" }, "Add")) : null,
    admin ? invitations(team, errors) : null);
}

/**
 * An admin's invitation links: make one (its link is shown this once: only its hash is
 * stored), see the open ones, revoke one. Whoever opens a link signs up as a member.
 * @param {any} team
 * @param {HTMLElement} errors
 */
function invitations(team, errors) {
  const base = `/api/teams/${team.id}/invitations/`;
  const made = h("div", { class: "invitation-made", "aria-live": "polite" });
  const open = h("div", { class: "invitations-open" });
  const load = async () => {
    const rows = await api(base);
    fill(open, rows.length ? table(["open invitation", "expires", ""], rows.map((/** @type {any} */ i) => [
      `made by ${i.created_by ?? "a former member"}, ${new Date(i.created).toLocaleString()}`,
      new Date(i.expires).toLocaleString(),
      h("button", { type: "button", class: "danger", "data-revoke": i.id, onclick: () => attempt(errors, async () => {
        await api(`${base}${i.id}/`, { method: "DELETE" });
        await load();
      }) }, "Revoke")]), { class: "invitations" }) : null);
  };
  const invite = h("button", { type: "button", class: "invite", onclick: () => attempt(errors, async () => {
    const invitation = await api(base, { method: "POST" });
    fill(made, h("label", null, "Send this link to one person (shown only now): ",
      h("input", { class: "invitation-url", readonly: true, value: invitation.url, size: 60 })),
    h("p", { class: "muted" }, `It works once, until ${new Date(invitation.expires).toLocaleString()}: `
      + "whoever opens it makes an account and joins the team as a member."));
    await load();
  }) }, "Make an invitation link");
  load().catch((error) => fill(open, h("p", { class: "error" }, String(error.message ?? error))));
  return h("div", { class: "team-invite" }, invite, made, open);
}

/**
 * @param {string} current
 * @param {string} label
 * @param {(value: string) => void} [onchange]
 */
function roleSelect(current, label, onchange) {
  return h("select", { "aria-label": label, onchange: onchange ? (/** @type {any} */ e) => onchange(e.target.value) : null },
    ROLES.map((r) => h("option", { value: r, selected: r === current }, r)));
}

/**
 * Runs `call`; a 400 or 403 from the API is shown in `errors` (and `undo` redraws what
 * the person changed), anything else is thrown.
 * @param {HTMLElement} errors
 * @param {() => Promise<void>} call
 * @param {() => Promise<void>} [undo]
 */
async function attempt(errors, call, undo) {
  fill(errors);
  try {
    await call();
  } catch (error) {
    if (!(error instanceof ApiError) || ![400, 403, 404, 409].includes(error.status)) throw error;
    const { fields, general } = fieldErrors(error.body, ["name", "username", "role"]);
    fill(errors, [...Object.values(fields).flat(), ...general].map((m) => h("li", null, m)));
    if (undo) await undo(); // the role select shows what the server kept
  }
}

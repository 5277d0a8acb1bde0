// The skill library (/skills/) and a card's page (/skills/<id>/): the team reads a card
// against its evidence, approves or rejects it with a comment, edits its text as a new
// version and discusses it. Everything comes from /api/skills/; the API decides who may.
import { html as diffHtml } from "diff2html";
import "diff2html/bundles/css/diff2html.min.css";
import { api, ApiError } from "../api.js";
import { cardSocketUrl, LiveClient } from "../live.js";
import { fieldErrors } from "../transforms/forms.js";
import { approveWhyNot, changeNotice, effectText, reviewActions, riskText, SKILL_SORTS, SKILL_STATUSES, skillFiltersFromQuery,
  skillsQuery, stateLink, vectorDiff, withTeam } from "../transforms/skills.js";
import { renderEffects } from "./charts.js";
import { excerptBlock } from "./code.js";
import { facts, fill, h, table } from "./dom.js";

const REVIEWING_ROLES = ["admin", "reviewer"];
/** @type {Record<string, string>} */
const LIVE_TEXT = { connecting: " · connecting…", open: " · live", retrying: " · reconnecting…", refused: " · not live" };

/** @param {HTMLElement} root */
export async function mountSkillLibrary(root) {
  const filters = skillFiltersFromQuery(new URLSearchParams(window.location.search));
  const [tasks, libraries] = await Promise.all([api("/api/tasks/"), api("/api/skills/libraries/")]);
  const select = (/** @type {string} */ name, /** @type {string} */ any, /** @type {readonly string[]} */ values,
    /** @type {string} */ current) => h("select", { name, id: `filter-${name}` }, any ? h("option", { value: "" }, any) : null,
    values.map((v) => h("option", { value: v, selected: v === current }, v)));
  const taskSelect = select("task", "all tasks", tasks.map((/** @type {any} */ t) => t.name), filters.task);
  const statusSelect = select("status", "any status", SKILL_STATUSES, filters.status);
  const sortSelect = select("sort", "", SKILL_SORTS, filters.sort);
  // The intents and architectures the library holds, learnt from what it lists.
  const intentSelect = select("intent", "any intent", filters.intent ? [filters.intent] : [], filters.intent);
  const archSelect = select("arch", "any architecture", filters.arch ? [filters.arch] : [], filters.arch);
  const seen = { intent: new Set(filters.intent ? [filters.intent] : []), arch: new Set(filters.arch ? [filters.arch] : []) };
  const learn = (/** @type {"intent"|"arch"} */ name, /** @type {HTMLElement} */ box, /** @type {string[]} */ values) => {
    const before = seen[name].size;
    values.filter(Boolean).forEach((v) => seen[name].add(v));
    if (seen[name].size === before) return;
    const current = /** @type {HTMLSelectElement} */ (box).value;
    fill(box, h("option", { value: "" }, name === "intent" ? "any intent" : "any architecture"),
      [...seen[name]].sort().map((v) => h("option", { value: v, selected: v === current }, v)));
  };
  // The library: the project's default one, or one of the reader's teams'.
  const librarySelect = h("select", { name: "team", id: "filter-team" }, libraries.map((/** @type {any} */ l) =>
    h("option", { value: l.team == null ? "" : String(l.team), selected: String(l.team ?? "") === filters.team },
      `${l.team == null ? l.name : `${l.name}'s library`} (${l.cards})`)));
  const list = h("div", { class: "skills-table" });
  const tools = h("div", { class: "library-tools" });
  const message = h("p", { class: "skill-message", role: "status" });
  const form = h("form", { class: "filters", onchange: () => load(), onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); load(); } },
    h("label", { for: "filter-team" }, "Library "), librarySelect,
    h("label", { for: "filter-intent" }, "Intent "), intentSelect,
    h("label", { for: "filter-task" }, "Task "), taskSelect, h("label", { for: "filter-arch" }, "Architecture "), archSelect,
    h("label", { for: "filter-status" }, "Status "), statusSelect,
    h("label", { for: "filter-sort" }, "Sort by "), sortSelect);
  fill(root, h("h1", null, "Skill library"),
    h("p", { class: "lede" }, "Optimizations induced from expert kernels, each admitted by a roundtrip on the GPU and reviewed by the team. "
      + "The default library is the project's; a team copies it (or imports one) and reviews its own copies, which its runs then use."),
    form, tools, message, list);

  async function load() {
    const team = /** @type {HTMLSelectElement} */ (librarySelect).value;
    const current = { team, task: /** @type {HTMLSelectElement} */ (taskSelect).value,
      intent: /** @type {HTMLSelectElement} */ (intentSelect).value, arch: /** @type {HTMLSelectElement} */ (archSelect).value,
      status: /** @type {HTMLSelectElement} */ (statusSelect).value, sort: /** @type {HTMLSelectElement} */ (sortSelect).value };
    const query = skillsQuery(current);
    window.history.replaceState(null, "", `/skills/${query}`);
    const library = libraries.find((/** @type {any} */ l) => String(l.team ?? "") === team);
    fill(tools, h("a", { class: "button", href: withTeam("/api/skills/export/", team) }, "Export the library (.json)"),
      team && REVIEWING_ROLES.includes(library?.role) ? h("button", { type: "button", id: "copy-default", class: "button",
        onclick: async () => {
          try {
            const done = await api("/api/skills/copy/", { method: "POST", body: { team: Number(team) } });
            fill(message, `Copied ${done.created.length} cards from the default library (${done.skipped.length} the team had already).`);
            await load();
          } catch (error) {
            fill(message, h("span", { class: "error" }, error instanceof ApiError ? fieldErrors(error.body, []).general.join("; ") : String(error)));
          }
        } }, "Copy the default library into this team's") : null);
    const rows = await api(`/api/skills/${query}`);
    learn("intent", intentSelect, rows.map((/** @type {any} */ r) => r.intent));
    learn("arch", archSelect, rows.map((/** @type {any} */ r) => r.arch));
    fill(list, rows.length ? table(["intent", "effect (median, range)", "lineages", "steps", "runs", "status", "reviews", "comments"],
      rows.map((/** @type {any} */ r) => [h("a", { href: withTeam(`/skills/${r.card_id}/`, team), class: "skill-link" },
        r.kind === "skeleton" ? `${r.intent} · skeleton ${r.skeleton}` : r.intent),
        effectText(r.effect), String(r.lineages), String(r.steps), String(r.runs), h("span", { class: `status status-${r.status}` }, r.status),
        String(r.reviews), String(r.comments)]), { class: "skills" })
      : h("p", { class: "empty" }, team && !rows.length && !current.status && !current.task && !current.intent && !current.arch
        ? "This team's library is empty: its runs use the default library until it copies or imports cards." : "No card matches."));
  }
  await load();
}

/** @param {HTMLElement} root @param {string} cardId */
export async function mountSkillCard(root, cardId) {
  const team = skillFiltersFromQuery(new URLSearchParams(window.location.search)).team;
  const at = (/** @type {string} */ path) => withTeam(`/api/skills/${cardId}/${path}`, team);
  const message = h("p", { class: "skill-message", role: "status" });
  const say = (/** @type {string} */ text, error = false) => fill(message, error ? h("span", { class: "error" }, text) : text);

  async function act(/** @type {() => Promise<any>} */ write, /** @type {string} */ done) {
    try {
      await write();
      await render();
      say(done);
    } catch (error) {
      say(error instanceof ApiError ? fieldErrors(error.body, []).general.join("; ") : String(error), true);
    }
  }

  let revision = 0;
  let liveStatus = "connecting"; // the socket's, shown beside the crumbs across renders
  /** @type {Promise<void>|null} */
  let rendering = null;
  async function render() {
    // One render at a time: a change heard while the page's own write renders waits for
    // that render, which may already show it.
    while (rendering) await rendering;
    rendering = draw();
    try {
      await rendering;
    } finally {
      rendering = null;
    }
  }

  async function draw() {
    const [card, versions, usage, effects] = await Promise.all([api(at("")), api(at("versions/")), api(at("usage/")),
      api(at("effects/"))]);
    revision = card.revision;
    const data = card.card;
    const chart = h("div", { class: "effects-holder" });
    if (effects.groups.length) renderEffects(chart, effects.groups);
    fill(root,
      h("p", { class: "crumbs" }, h("a", { href: withTeam("/skills/", team) }, card.library.team == null ? "Skill library" : `${card.library.name}'s library`),
        ` / ${card.card_id}`, h("span", { class: "live-status", id: "card-live", "data-status": liveStatus }, LIVE_TEXT[liveStatus] ?? "")),
      h("h1", null, card.intent, " ", h("span", { id: "card-status", class: `status status-${card.status}` }, card.status)),
      h("p", { class: "lede", id: "card-sentence" }, card.sentence),
      data.notes ? h("p", { class: "notes", id: "card-notes" }, data.notes) : null,
      facts([["effect", effectText(card.effect)], ["lineages", String(card.lineages)], ["steps", String(card.steps)],
        ["tasks", card.tasks.join(", ")], ["architecture", data.scope?.arch ?? null],
        ["library", card.library.team == null ? "the project's default library" : card.library.name],
        ["copied from", card.library.copied_from ? h("a", { href: `/skills/${card.library.copied_from}/`, id: "copied-from" },
          `the default library's ${card.library.copied_from}`) : null]]),
      message,
      reviewBox(card), editBox(card),
      card.lineages_behind.length ? h("p", { class: "lineages-behind" }, "Induced from the lineages of ",
        card.lineages_behind.map((/** @type {any} */ l, /** @type {number} */ i) => [i ? ", " : "", h("a", { href: l.page, class: "lineage-link" }, l.task)]), ".") : null,
      section("Effects: measured speed-ups", [effects.groups.length ? chart : h("p", null, "Nothing measured yet."),
        effects.metrics.length ? metricTable(effects.metrics) : null]),
      card.kind === "skeleton" ? skeletonSections(data) : [
        folded("The anchor, in the code it came from", anchorView(card.anchor_code ?? [])),
        folded("The vector: the experts' steps", vectorView(data.vector)),
        folded("Generalised patterns", patterns(data.anchor?.rewrites ?? [])),
        section("Preconditions", preconditions(data.preconditions ?? {}))],
      section("Risks", risks(data.risks ?? [], card.lineages_behind)),
      card.kind === "skeleton" ? null
        : section("Roundtrip", data.roundtrip ? facts([["status", data.roundtrip.status], ["trials", String((data.roundtrip.trials ?? []).length)]]) : h("p", null, "not tried yet")),
      section("Reviews", h("ol", { id: "review-history" }, card.review_history.map((/** @type {any} */ r) =>
        h("li", null, h("strong", null, `${r.reviewer} ${r.decision === "approve" ? "approved" : "rejected"}`),
          ` (${r.status_before} → ${r.status_after}, ${new Date(r.created_at).toLocaleString()}): `, h("span", { class: "review-comment" }, r.comment))))),
      folded("Versions of its text", h("ol", { id: "versions" }, versions.map((/** @type {any} */ v) =>
        h("li", null, `v${v.number} by ${v.author ?? "induction"}, ${new Date(v.created_at).toLocaleString()}`,
          v.number > 1 ? h("div", { class: "version-diff", html: diffHtml(v.diff, { outputFormat: "side-by-side", drawFileList: false }) }) : null)))),
      section("Where it was applied", usage.length ? table(["run", "task", "node", "outcome", "vs its parent"],
        usage.map((/** @type {any} */ u) => [h("a", { href: u.page }, `run ${u.run}`), u.task, String(u.node),
          u.status || "pending", u.speedup_vs_parent ? `${u.speedup_vs_parent.toFixed(2)}x` : "—"]), { id: "usage" })
        : h("p", null, "Not applied in any run you can see.")),
      section("Comments", commentBox(card)));
    root.dataset.cardStatus = card.status;
  }

  function reviewBox(/** @type {any} */ card) {
    const actions = reviewActions(card);
    const whyNot = approveWhyNot(card);
    if (!actions.length) return whyNot ? h("p", { class: "muted", id: "review-why-not" }, whyNot) : null;
    const comment = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: "review-comment", rows: 2, placeholder: "why (required)" }));
    const button = (/** @type {"approve"|"reject"} */ decision) => h("button", { type: "button", id: `review-${decision}`,
      class: decision === "approve" ? "button primary" : "button",
      onclick: () => act(() => api(at("review/"), { method: "POST", body: { decision, comment: comment.value } }),
        decision === "approve" ? "Approved." : "Rejected.") }, decision === "approve" ? "Approve" : "Reject");
    return h("div", { class: "review-box" }, h("label", { for: "review-comment" }, "Review "), comment, actions.map(button),
      whyNot ? h("p", { class: "muted", id: "review-why-not" }, whyNot) : null);
  }

  function editBox(/** @type {any} */ card) {
    if (!card.can_review) return null;
    const sentence = /** @type {HTMLInputElement} */ (h("input", { id: "edit-sentence", value: card.sentence, size: 80 }));
    const notes = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: "edit-notes", rows: 3 }, card.card.notes ?? ""));
    return h("details", { class: "edit-box" }, h("summary", null, "Edit its text (a new version)"),
      h("label", { for: "edit-sentence" }, "Sentence "), sentence, h("label", { for: "edit-notes" }, "Notes "), notes,
      h("button", { type: "button", id: "edit-save", class: "button", onclick: () => act(() => api(at(""),
        { method: "PATCH", body: { sentence: sentence.value, notes: notes.value } }), "Saved as a new version.") }, "Save"));
  }

  function commentBox(/** @type {any} */ card) {
    const text = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: "comment-text", rows: 2 }));
    return [h("ol", { id: "comments" }, card.comment_thread.map((/** @type {any} */ c) =>
      h("li", null, h("strong", null, c.author), ` (${new Date(c.created_at).toLocaleString()}): `, c.text))),
    h("label", { for: "comment-text" }, "Add a comment "), text,
    h("button", { type: "button", id: "comment-post", class: "button", onclick: () => act(() =>
      api(at("comments/"), { method: "POST", body: { text: text.value } }), "Comment added.") }, "Comment")];
  }

  await render();
  // Live: the card's socket says its revision; a newer one than shown is read again. The
  // page's own writes render at once (act), so their echo finds nothing newer.
  const live = new LiveClient({ url: () => cardSocketUrl(cardId, team), lastSeq: () => revision, onEvents: () => {},
    onStatus: (status) => {
      liveStatus = status;
      const shown = document.getElementById("card-live");
      if (shown) {
        shown.textContent = LIVE_TEXT[status] ?? "";
        shown.dataset.status = status;
      }
    },
    onMessage: async (/** @type {any} */ m) => {
      if (m.type !== "card") return;
      while (rendering) await rendering;
      if (!(m.data?.revision > revision)) return; // our own write's echo, shown already
      if (typing()) {
        // Not under the person's cursor: what they are writing stays until they choose.
        fill(message, "The card changed while you were writing. ",
          h("button", { type: "button", class: "link", id: "show-change", onclick: () => act(async () => {}, "") }, "Show it"));
        return;
      }
      await render();
      say(changeNotice(m.data.what ?? null, root.dataset.cardStatus ?? ""));
    } });

  /** Whether the person has something half-written on the page (a review, a comment, an edit). */
  function typing() {
    const written = ["review-comment", "comment-text"].some((id) =>
      /** @type {HTMLTextAreaElement|null} */ (document.getElementById(id))?.value);
    return written || Boolean(root.querySelector("details.edit-box[open]"));
  }
  live.start();
}

/**
 * The median change of each metric per lineage and per run (the API gives ratios
 * after / before): a row per source, a column per metric, as a relative change.
 */
function metricTable(/** @type {{label: string, steps: number, median: Record<string, number>}[]} */ rows) {
  const metrics = [...new Set(rows.flatMap((r) => Object.keys(r.median)))].sort().slice(0, 12);
  const change = (/** @type {number} */ ratio) => `${ratio >= 1 ? "+" : ""}${(100 * (ratio - 1)).toFixed(1)}%`;
  return [h("p", { class: "muted" }, "Median change of each Nsight Compute metric over the steps (after / before − 1)."),
    table(["source", "steps", ...metrics], rows.map((r) => [r.label, String(r.steps),
      ...metrics.map((m) => r.median[m] == null ? "—" : change(r.median[m]))]), { class: "metric-medians" })];
}

/**
 * A skeleton card's own parts: the schedule it emits for any kernel of its family, what it
 * made of one of its source tasks' kernels (a diff), and its admission by transfer, trial
 * by trial (lineage/engine/skeleton_cards.py).
 */
function skeletonSections(/** @type {any} */ data) {
  const admission = data.admission ?? {};
  const times = (/** @type {number|null|undefined} */ x) => x == null ? "—" : `${x.toFixed(2)}x`;
  return [
    section("The skeleton", [facts([["skeleton", data.skeleton], ["family", data.family],
      ["expected speed-up", times(data.expected_speedup)], ["from the lineages of", (data.tasks ?? []).join(", ")]]),
      h("ul", { id: "skeleton-preconditions" }, (data.preconditions?.skeleton ?? []).map((/** @type {string} */ p) => h("li", null, p)))]),
    section("Example: what it makes of a kernel", data.example
      ? h("details", { class: "skeleton-example" }, h("summary", null,
        `${data.example.title}, on ${data.example.task}'s ${data.example.kernel.replace(/^its /, "")}: the diff`),
      h("div", { class: "vector-diff", id: "skeleton-example", html: diffHtml(data.example.diff, { outputFormat: "side-by-side", drawFileList: false }) }))
      : h("p", null, "None here: it applies to none of its source tasks' kernels in this project.")),
    section("Admission by transfer", [facts([["status", admission.status ?? "untried"], ["why", admission.why ?? null],
      ["rule", admission.rule ?? null]]),
    (admission.trials ?? []).length ? table(["task", "passed", "speed-up", "expected there", "reproduced"],
      admission.trials.map((/** @type {any} */ t) => [t.task, t.why ? `not applied: ${t.why}` : t.passed ? "yes" : "no",
        times(t.speedup), times(t.expected_here), t.reproduced ? "yes" : "no"]), { id: "admission-trials" })
      : h("p", null, "No trial recorded.")])];
}

function section(/** @type {string} */ title, /** @type {any} */ body) {
  return h("section", { class: "skill-section" }, h("h2", null, title), body);
}

/** A long section folded under its title (the card's summary stays in the first screen). */
function folded(/** @type {string} */ title, /** @type {any} */ body) {
  return h("section", { class: "skill-section" }, h("details", null, h("summary", null, h("h2", { class: "inline" }, title)), body));
}

/** Each step's before-state, cut to the lines it acts on (marked) and a few around them. */
function anchorView(/** @type {{task: string, state: string, first_line: number, text: string, marked: number[]}[]} */ shown) {
  if (!shown.length) return h("p", null, "Not shown: no step's expert is in this project.");
  return shown.map((s) => h("div", { class: "anchor-code", "data-task": s.task },
    h("p", null, h("strong", null, s.task), ` in {${s.state || "plain"}}: line${s.marked.length === 1 ? "" : "s"} `,
      s.marked.join(", ")),
    excerptBlock(s.text, s.first_line, s.marked)));
}

function vectorView(/** @type {any[]} */ vector) {
  const text = vectorDiff(vector);
  if (!text) return h("p", null, "No diff recorded.");
  return h("div", { class: "vector-diff", html: diffHtml(text, { outputFormat: "side-by-side", drawFileList: false }) });
}

function patterns(/** @type {any[]} */ rewrites) {
  if (!rewrites.length) return h("p", null, "None: the card's steps are replayed whole.");
  const holes = (/** @type {string} */ text) => text.split(/(\?\d+)/).map((part) => /^\?\d+$/.test(part) ? h("mark", { class: "hole" }, part) : part);
  return h("ul", { class: "patterns" }, rewrites.map((r) => h("li", null, h("code", null, holes(r.before)), " → ",
    h("code", null, holes(r.after)), ` (from ${(r.tasks ?? []).join(", ")}${r.generalised ? "" : "; one lineage's only"})`)));
}

function preconditions(/** @type {any} */ pre) {
  const required = Object.entries(pre.order?.required ?? {});
  return required.length ? h("ul", null, required.map(([intent, tasks]) => h("li", null, `after ${intent}, in ${(/** @type {string[]} */ (tasks)).join(", ")}`)))
    : h("p", null, "No order the lineages showed to matter.");
}

/** Each risk, linked to the state of its lineage where the attempt that showed it was made. */
function risks(/** @type {any[]} */ found, /** @type {{task: string, page: string}[]} */ lineages) {
  const pages = new Map(lineages.map((l) => [l.task, l.page]));
  return found.length ? h("ul", { class: "risks" }, found.slice(0, 50).map((r) => {
    const text = riskText(r);
    const page = pages.get(r.task);
    return h("li", null, page && r.state != null ? h("a", { class: "risk-link", href: stateLink(page, r.state) }, text) : text);
  })) : h("p", null, "None seen.");
}


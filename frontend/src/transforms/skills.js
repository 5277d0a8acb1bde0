// The skill library's pages: the query its filters make, and how a card's numbers read.

export const SKILL_STATUSES = /** @type {const} */ (["induced", "verified", "failed", "approved", "rejected", "retired"]);
export const SKILL_SORTS = /** @type {const} */ (["intent", "effect", "evidence"]);

/**
 * @param {{team?: string, intent?: string, task?: string, arch?: string, status?: string, sort?: string}} filters
 * @returns {string} "?task=softmax&sort=effect", or "" with no filter
 */
export function skillsQuery(filters) {
  const params = new URLSearchParams();
  if (filters.team && /^[0-9]+$/.test(filters.team)) params.set("team", filters.team);
  if (filters.intent) params.set("intent", filters.intent);
  if (filters.task) params.set("task", filters.task);
  if (filters.arch) params.set("arch", filters.arch);
  if (filters.status && SKILL_STATUSES.includes(/** @type {any} */ (filters.status))) params.set("status", filters.status);
  if (filters.sort && filters.sort !== "intent" && SKILL_SORTS.includes(/** @type {any} */ (filters.sort))) params.set("sort", filters.sort);
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** @param {URLSearchParams} params */
export function skillFiltersFromQuery(params) {
  const status = params.get("status") ?? "";
  const sort = params.get("sort") ?? "intent";
  const team = params.get("team") ?? "";
  return {
    team: /^[0-9]+$/.test(team) ? team : "",
    intent: params.get("intent") ?? "",
    task: params.get("task") ?? "",
    arch: params.get("arch") ?? "",
    status: SKILL_STATUSES.includes(/** @type {any} */ (status)) ? status : "",
    sort: SKILL_SORTS.includes(/** @type {any} */ (sort)) ? sort : "intent",
  };
}

/**
 * The measured speed-ups in words: "1.16x (0.69–2.62x, 90 steps)"; "not measured" when none.
 * @param {{n?: number, min?: number|null, median?: number|null, max?: number|null}} effect
 */
export function effectText(effect) {
  if (!effect || !effect.n || effect.median == null) return "not measured";
  const x = (/** @type {number} */ v) => `${v.toFixed(2)}x`;
  const range = effect.min != null && effect.max != null ? `${x(effect.min)}–${x(effect.max)}, ` : "";
  return `${x(effect.median)} (${range}${effect.n} step${effect.n === 1 ? "" : "s"})`;
}

/**
 * What a reviewer may do with a card in its state (the API decides; this only offers).
 * @param {{status: string, can_review?: boolean}} card
 * @returns {("approve"|"reject")[]}
 */
export function reviewActions(card) {
  if (!card.can_review) return [];
  const actions = [];
  if (card.status === "verified" || card.status === "rejected") actions.push("approve");
  if (!["rejected", "retired"].includes(card.status)) actions.push("reject");
  return /** @type {("approve"|"reject")[]} */ (actions);
}

/**
 * Why a reviewer is not offered Approve, in words (null when Approve is offered, or when
 * the reader may not review at all): only what the system verified can be approved.
 * @param {{status: string, can_review?: boolean, kind?: string}} card
 */
export function approveWhyNot(card) {
  if (!card.can_review || reviewActions(card).includes("approve")) return null;
  const check = card.kind === "skeleton" ? "its admission by transfer" : "its roundtrip";
  switch (card.status) {
    case "induced": return `Approve comes once ${check} has reproduced its effect: not tried yet.`;
    case "failed": return `Not offered: ${check} did not reproduce its effect (its risks say where).`;
    case "approved": return "Approved already.";
    case "retired": return "Retired: it serves no search.";
    default: return null;
  }
}

/**
 * A card's risk in words, each kind saying what happened:
 * "slower in topk: 0.93x from {OPT_A}", "refused in relu without GRID_STRIDE (wrong_values): …".
 * @param {{kind: string, task: string, without?: string, guard?: string, message?: string, before?: string, speedup?: number}} risk
 */
export function riskText(risk) {
  const guard = risk.guard ? ` (${risk.guard})` : "";
  const message = risk.message ? `: ${risk.message}` : "";
  switch (risk.kind) {
    case "slower":
      return `slower in ${risk.task}: ${risk.speedup != null ? `${risk.speedup.toFixed(2)}x` : "a slow-down"} `
        + `from {${risk.before || "plain"}}`;
    case "no_effect_without":
      return `no effect in ${risk.task} without ${risk.without}${guard}${message}`;
    case "refused_without":
      return `refused in ${risk.task} without ${risk.without}${guard}${message}`;
    case "rejected_in_lineage":
      return `rejected in ${risk.task}'s lineage${guard}${message}`;
    case "transfer trial":
      return `transfer trial on ${risk.task}${message || ": did not reproduce its effect"}`;
    default:
      return `${risk.kind} in ${risk.task}${risk.without ? ` without ${risk.without}` : ""}${guard}${message}`;
  }
}

/**
 * The vector's diffs as one unified diff text, each step's file named after its lineage
 * and states, for the side-by-side renderer.
 * @param {{task: string, before: string, after: string, source_diff?: string}[]} vector
 */
export function vectorDiff(vector) {
  return (vector ?? []).filter((v) => v.source_diff).map((v) => {
    const name = `${v.task}: {${v.before || "plain"}} -> {${v.after}}`;
    return String(v.source_diff).replace(/^--- .*$/m, `--- a/${name}`).replace(/^\+\+\+ .*$/m, `+++ b/${name}`);
  }).join("\n");
}

/**
 * A lineage page opened at one of its states (its flags on; "" is the plain attempt),
 * which the lineage page reads back from the hash.
 * @param {string} page @param {string} state
 */
export function stateLink(page, state) {
  return `${page}#state=${encodeURIComponent(state || "(plain attempt)")}`;
}

/**
 * `path` in a team's library: "/api/skills/x/" -> "/api/skills/x/?team=3" (the default
 * library when `team` is empty); a query `path` has already is kept.
 * @param {string} path @param {string|null|undefined} team
 */
export function withTeam(path, team) {
  if (!team || !/^[0-9]+$/.test(String(team))) return path;
  return `${path}${path.includes("?") ? "&" : "?"}team=${team}`;
}

/** What a change a card's page heard of means, in words (lineage.consumers' `what`). */
export function changeNotice(/** @type {string|null} */ what, /** @type {string} */ status) {
  switch (what) {
    case "roundtrip": return `Its roundtrip finished: the card is ${status} now.`;
    case "review": return `Someone reviewed it: the card is ${status} now.`;
    case "edit": return "Someone edited its text: a new version.";
    case "comment": return "A new comment.";
    default: return `The card changed (it is ${status}).`;
  }
}

/**
 * The effects chart's points and its log axis: every finite positive speed-up, each with
 * its group's row; the domain spans them and 1x, padded by a tenth on each side (in log).
 * @param {{kind: string, label: string, link: string|null, points: {speedup: number|null, what: string, link: string|null}[]}[]} groups
 */
export function effectPoints(groups) {
  const points = [];
  const missing = [];
  groups.forEach((group, row) => {
    for (const point of group.points) {
      if (typeof point.speedup === "number" && Number.isFinite(point.speedup) && point.speedup > 0) {
        points.push({ ...point, row, kind: group.kind });
      } else {
        missing.push({ ...point, row, kind: group.kind });
      }
    }
  });
  const logs = [0, ...points.map((p) => Math.log(p.speedup))];
  const low = Math.min(...logs);
  const high = Math.max(...logs);
  const pad = Math.max((high - low) / 10, 0.02);
  return { points, missing, domain: /** @type {[number, number]} */ ([Math.exp(low - pad), Math.exp(high + pad)]) };
}

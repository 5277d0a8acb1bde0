// One bundle for every page: the template says which page it is (data-page on <body>).
import "./styles.css";
import { ApiError } from "./api.js";
import { h, fill } from "./views/dom.js";
import { mountNewRun } from "./views/newRun.js";
import { mountRuns } from "./views/runs.js";
import { mountSession, runSource, sharedSource } from "./views/session.js";
import { mountLineage } from "./views/lineage.js";
import { mountSkillCard, mountSkillLibrary } from "./views/skills.js";
import { mountTeams } from "./views/teams.js";
import { mountCompare } from "./views/compare.js";

const pages = {
  runs: (root) => mountRuns(root),
  "new-run": (root) => mountNewRun(root),
  run: (root) => mountSession(root, runSource(Number(root.dataset.runId))),
  share: (root) => mountSession(root, sharedSource(String(root.dataset.shareToken))),
  skills: (root) => mountSkillLibrary(root),
  skill: (root) => mountSkillCard(root, String(root.dataset.cardId)),
  lineage: (root) => mountLineage(root, Number(root.dataset.lineageId)),
  teams: (root) => mountTeams(root),
  compare: (root) => mountCompare(root),
};

async function start() {
  const root = document.getElementById("app");
  const page = document.body.dataset.page;
  if (!root || !page || !(page in pages)) return;
  try {
    await pages[/** @type {keyof typeof pages} */ (page)](root);
    root.dataset.ready = "true";
  } catch (error) {
    console.error(error);
    const gone = error instanceof ApiError && error.status === 404;
    fill(root, h("div", { class: "error" }, h("h2", null, gone ? "Not found" : "Something went wrong"),
      h("p", null, gone ? "No such run, or not yours to see (a share link may have been revoked)." : String(error.message ?? error))));
    root.dataset.ready = "error";
  }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();

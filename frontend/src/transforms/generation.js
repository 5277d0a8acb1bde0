// How a run's first kernel was written from an intent (OptiML-G), as the tree's first
// nodes: a small intent node, then each attempt in order, the last attempt being the
// search's root. Pure: the run detail's `generation` in, pseudo-nodes and their places
// out; the search's own rows, hierarchy and layout are untouched. Horizontal like the
// tree (transforms/layout.js): the chain runs from the intent, on the left, to the root.

/** What each stage the gate stopped at reads as in a label (search/generation/loop.py). */
export const STAGE_TEXT = Object.freeze({
  endpoint: "no answer", reply: "no kernel in its reply", plan: "launch plan refused",
  policy: "policy refused", compile: "compile failed", L0: "L0 failed",
  compiled: "compiled", passed: "passed",
});

/**
 * @typedef {{round: number, writer: string, experts: string[], stage: string, passed: boolean,
 *   guard: string, message: string, source: string|null, diff: string}} GenerationAttempt
 * @typedef {{id: string, kind: "intent"|"attempt", index: number, label: string, tip: string,
 *   failed: boolean, stage: string|null}} ChainNode
 *   index: the attempt's place in `attempts` (-1: the intent)
 * @typedef {{intent: string, experts: string[], attempts: GenerationAttempt[], nodes: ChainNode[],
 *   rootLabel: string, editedDiff: string|null}} GenerationChain
 *   nodes: the intent and every attempt but the last (the last one is the root node)
 *   editedDiff: what the run's creator changed in the last attempt's kernel before the
 *   search started from it (null: started from it as written)
 * @typedef {ChainNode & {x: number, y: number, labelBelow: boolean}} PlacedChainNode
 */

/**
 * @param {any} generation GET /api/runs/<id>/'s `generation` (null: not written from an intent)
 * @returns {GenerationChain|null}
 */
export function generationChain(generation) {
  if (generation == null) return null;
  if (typeof generation !== "object" || !Array.isArray(generation.attempts)) {
    throw new TypeError("a run's generation must have a list of attempts");
  }
  if (!generation.attempts.length) return null;
  const attempts = generation.attempts.map(attemptModel);
  const intent = String(generation.intent ?? "");
  const nodes = [
    { id: "gen-intent", kind: /** @type {const} */ ("intent"), index: -1, label: "intent", failed: false, stage: null,
      tip: `The intent: ${intent || "(none given)"}\n${attempts.length} attempt(s) to write the first kernel: click to see them` },
    ...attempts.slice(0, -1).map((a, index) => ({ id: `gen-a${index + 1}`, kind: /** @type {const} */ ("attempt"), index,
      label: attemptLabel(a, index), failed: isFailedAttempt(a), stage: a.stage, tip: attemptTip(a, index) })),
  ];
  const editedDiff = typeof generation.edited?.diff === "string" ? generation.edited.diff : null;
  return { intent, experts: (generation.experts ?? []).map(String), attempts, nodes, editedDiff,
    rootLabel: attemptLabel(attempts[attempts.length - 1], attempts.length - 1) + (editedDiff != null ? ", edited" : "") };
}

/** @returns {GenerationAttempt} */
function attemptModel(a) {
  return { round: Number(a?.round ?? 0), writer: String(a?.writer ?? "?"),
    experts: Array.isArray(a?.experts) ? a.experts.map(String) : [], stage: String(a?.stage ?? "?"),
    passed: Boolean(a?.passed), guard: String(a?.guard ?? ""), message: String(a?.message ?? ""),
    source: typeof a?.source === "string" ? a.source : null, diff: typeof a?.diff === "string" ? a.diff : "" };
}

/** A kernel that compiled (where no GPU could run L0) is the written kernel, not a failure. */
export function isFailedAttempt(/** @type {GenerationAttempt} */ a) {
  return !a.passed && a.stage !== "compiled" && a.stage !== "passed";
}

/** "#a1 qwen: compile failed" */
export function attemptLabel(/** @type {GenerationAttempt} */ a, /** @type {number} */ index) {
  return `#a${index + 1} ${a.writer}: ${stageText(a.stage)}`;
}

export function stageText(/** @type {string} */ stage) {
  return Object.hasOwn(STAGE_TEXT, stage) ? STAGE_TEXT[/** @type {keyof typeof STAGE_TEXT} */ (stage)] : stage;
}

function attemptTip(/** @type {GenerationAttempt} */ a, /** @type {number} */ index) {
  const helpers = a.experts.filter((e) => e !== a.writer);
  return `${attemptLabel(a, index)} (round ${a.round})` + (helpers.length ? `\nwith ${helpers.join(", ")}` : "") +
    (a.message ? `\n${a.message.split("\n")[0]}` : "");
}

/**
 * The chain's places: the node k steps before the root at `spacing` * k to its left, on
 * the root's line; labels alternate above and below (the root's own is above), so that
 * neighbours' labels do not overlap at a spacing narrower than a label.
 * @param {GenerationChain} chain
 * @param {{x: number, y: number}} root where the layout put the root node
 * @param {{spacing: number}} options px between neighbours
 * @returns {{nodes: PlacedChainNode[], links: {source: {x: number, y: number}, target: {x: number, y: number}}[],
 *   extent: {x0: number, x1: number, y0: number, y1: number}}}
 */
export function placeChain(chain, root, { spacing }) {
  if (!(spacing > 0)) throw new RangeError(`the chain's spacing must be positive, got ${spacing}`);
  const n = chain.nodes.length;
  const nodes = chain.nodes.map((node, i) => {
    const steps = n - i; // from the root
    return { ...node, x: tenth(root.x - steps * spacing), y: root.y, labelBelow: steps % 2 === 1 };
  });
  const points = [...nodes, root];
  const links = nodes.map((node, i) => ({ source: node, target: points[i + 1] }));
  return { nodes, links, extent: { x0: nodes[0]?.x ?? root.x, x1: root.x, y0: root.y, y1: root.y } };
}

/** The smallest extent holding both. */
export function mergeExtents(a, b) {
  return { x0: Math.min(a.x0, b.x0), x1: Math.max(a.x1, b.x1), y0: Math.min(a.y0, b.y0), y1: Math.max(a.y1, b.y1) };
}

const tenth = (v) => Math.round(v * 10) / 10;

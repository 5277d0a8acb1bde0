// Shared rows for the tests: a small run as the API sends it, and a synthetic big one.

/** A root, two passing children (one better, one worse), a failed pair under the root, a pending leaf. */
export function smallRun() {
  return [
    { id: 0, parentId: null, state: "done", status: "passed", source: "root", title: "naive", time_ms: 0.8, spread_ms: 0.01, reward: 0, visits: 6, value: 0.2, prior: 1 },
    { id: 1, parentId: 0, state: "done", status: "passed", source: "rewrite:vectorize", title: "float4 loads", time_ms: 0.5, spread_ms: 0.01, reward: 0.4, visits: 3, value: 0.4, prior: 0.5 },
    { id: 2, parentId: 0, state: "done", status: "passed", source: "tunable", title: "BLOCK=64", time_ms: 0.9, spread_ms: 0.02, reward: -0.1, visits: 1, value: -0.1, prior: 0.3 },
    { id: 3, parentId: 0, state: "done", status: "rejected", guard: "wrong_result", source: "llm:x", title: "skip tail", time_ms: null, reward: -1, visits: 1, value: -1, prior: 0.1 },
    { id: 4, parentId: 0, state: "done", status: "error", source: "rewrite:unroll", title: "unroll 8", time_ms: null, reward: -1, visits: 1, value: -1, prior: 0.1 },
    { id: 5, parentId: 1, state: "done", status: "passed", source: "rewrite:grid_stride", title: "grid stride", time_ms: 0.45, spread_ms: 0.01, reward: 0.1, visits: 1, value: 0.1, prior: 0.4 },
    { id: 6, parentId: 1, state: "pending", status: null, source: "tunable", title: "BLOCK=512", visits: 0, value: 0, prior: 0.2 },
  ];
}

/**
 * A deterministic random tree of `count` nodes (a seeded LCG, so snapshots and timings
 * compare run to run): each node's parent is an earlier node, a fifth of them failed.
 * @param {number} count
 */
export function syntheticRun(count, seed = 7) {
  let state = seed;
  const random = () => {
    state = (state * 1664525 + 1013904223) % 4294967296;
    return state / 4294967296;
  };
  const rows = [];
  for (let id = 0; id < count; id++) {
    const parentId = id === 0 ? null : Math.floor(random() ** 2 * id);
    const failed = id > 0 && random() < 0.2;
    rows.push({ id, parentId, state: "done", status: failed ? "rejected" : "passed", source: "tunable",
      title: `node ${id}`, time_ms: failed ? null : 0.3 + random(), reward: failed ? -1 : random() - 0.5,
      visits: 1 + Math.floor(random() * 20), value: 0, prior: random() });
  }
  return rows;
}

/** A run detail's `generation`: nvcc refused the first kernel, L0 the repair; the third is the root. */
export const WRITTEN = Object.freeze({
  intent: "relu over 2^28 floats",
  experts: ["qwen", "hpc-coder"],
  attempts: [
    { round: 0, writer: "qwen", experts: ["qwen", "hpc-coder"], stage: "compile", passed: false, guard: "",
      message: "line 3: expected a \";\"\nline 4: ...", source: "broken", diff: "" },
    { round: 1, writer: "qwen", experts: ["qwen"], stage: "L0", passed: false, guard: "correctness",
      message: "max |error| 1.0 at L0", source: "wrong", diff: "--- a\n+++ b\n@@ -1 +1 @@\n-broken\n+wrong\n" },
    { round: 2, writer: "hpc-coder", experts: ["hpc-coder"], stage: "compiled", passed: false, guard: "",
      message: "compiled; L0 runs in the run's first gate", source: "right", diff: "--- a\n+++ b\n@@ -1 +1 @@\n-wrong\n+right\n" },
  ],
});

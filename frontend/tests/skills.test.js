import { describe, expect, it } from "vitest";
import { effectText, reviewActions, skillFiltersFromQuery, skillsQuery, stateLink, vectorDiff } from "../src/transforms/skills.js";

describe("the skill library's query", () => {
  it("keeps only known filters and leaves the default sort out", () => {
    expect(skillsQuery({ task: "softmax", status: "verified", sort: "effect" })).toBe("?task=softmax&status=verified&sort=effect");
    expect(skillsQuery({ sort: "intent" })).toBe("");
    expect(skillsQuery({ status: "great", sort: "speed" })).toBe("");
  });
  it("reads a URL back, unknown values dropped", () => {
    expect(skillFiltersFromQuery(new URLSearchParams("task=relu&status=nope&sort=evidence")))
      .toEqual({ intent: "", task: "relu", status: "", sort: "evidence" });
  });
});

describe("a card's numbers and actions", () => {
  it("reads the effect as its median and range", () => {
    expect(effectText({ n: 90, min: 0.69, median: 1.16, max: 2.62 })).toBe("1.16x (0.69x–2.62x, 90 steps)");
    expect(effectText({ n: 0 })).toBe("not measured");
  });
  it("offers approve only for what the roundtrip verified, and nothing to a non-reviewer", () => {
    expect(reviewActions({ status: "verified", can_review: true })).toEqual(["approve", "reject"]);
    expect(reviewActions({ status: "induced", can_review: true })).toEqual(["reject"]);
    expect(reviewActions({ status: "approved", can_review: true })).toEqual(["reject"]);
    expect(reviewActions({ status: "verified", can_review: false })).toEqual([]);
  });
  it("names each step's diff after its lineage and states", () => {
    const text = vectorDiff([{ task: "relu", before: "", after: "OPT_VEC4", source_diff: "--- before.cu\n+++ after.cu\n-a\n+b\n" },
      { task: "softmax", before: "OPT_X", after: "OPT_X,OPT_VEC4" }]);
    expect(text).toBe("--- a/relu: {plain} -> {OPT_VEC4}\n+++ b/relu: {plain} -> {OPT_VEC4}\n-a\n+b\n");
  });
});

describe("a risk's link", () => {
  it("opens the lineage at the state, the lineage page reading it back", () => {
    const link = stateLink("/lineages/3/", "OPT_GRID_STRIDE,OPT_VEC4");
    expect(link).toBe("/lineages/3/#state=OPT_GRID_STRIDE%2COPT_VEC4");
    expect(new URLSearchParams(link.split("#")[1]).get("state")).toBe("OPT_GRID_STRIDE,OPT_VEC4");
    expect(stateLink("/lineages/3/", "")).toBe("/lineages/3/#state=(plain%20attempt)");
  });
});

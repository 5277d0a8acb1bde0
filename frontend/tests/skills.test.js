// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { cardSocketUrl, LiveClient } from "../src/live.js";
import { approveWhyNot, changeNotice, effectPoints, effectText, reviewActions, riskText, skillFiltersFromQuery, skillsQuery, stateLink, vectorDiff,
  withTeam } from "../src/transforms/skills.js";
import { renderEffects } from "../src/views/charts.js";

describe("the skill library's query", () => {
  it("keeps only known filters and leaves the default sort out", () => {
    expect(skillsQuery({ task: "softmax", status: "verified", sort: "effect" })).toBe("?task=softmax&status=verified&sort=effect");
    expect(skillsQuery({ sort: "intent" })).toBe("");
    expect(skillsQuery({ status: "great", sort: "speed" })).toBe("");
  });
  it("reads a URL back, unknown values dropped", () => {
    expect(skillFiltersFromQuery(new URLSearchParams("task=relu&status=nope&sort=evidence")))
      .toEqual({ team: "", intent: "", task: "relu", arch: "", status: "", sort: "evidence" });
    expect(skillFiltersFromQuery(new URLSearchParams("team=7")).team).toBe("7");
    expect(skillFiltersFromQuery(new URLSearchParams("team=7;drop")).team).toBe("");
  });
  it("names a team's library in every address, and only a team id", () => {
    expect(skillsQuery({ team: "3", sort: "effect" })).toBe("?team=3&sort=effect");
    expect(withTeam("/api/skills/vec4-v1/", "3")).toBe("/api/skills/vec4-v1/?team=3");
    expect(withTeam("/api/skills/?sort=effect", "3")).toBe("/api/skills/?sort=effect&team=3");
    expect(withTeam("/api/skills/vec4-v1/", "")).toBe("/api/skills/vec4-v1/");
    expect(withTeam("/api/skills/vec4-v1/", "x&y=1")).toBe("/api/skills/vec4-v1/");
    expect(cardSocketUrl("vec4-v1", "3", { protocol: "https:", host: "studio.example" }))
      .toBe("wss://studio.example/ws/skills/vec4-v1/?team=3");
    expect(cardSocketUrl("vec4-v1", null, { protocol: "http:", host: "localhost:8000" }))
      .toBe("ws://localhost:8000/ws/skills/vec4-v1/");
  });
});

describe("a card's page, live", () => {
  it("says what changed", () => {
    expect(changeNotice("roundtrip", "verified")).toBe("Its roundtrip finished: the card is verified now.");
    expect(changeNotice(null, "approved")).toBe("The card changed (it is approved).");
  });
  it("hands the socket's card frames to the page instead of calling them errors", () => {
    /** @type {any[]} */ const seen = [];
    /** @type {any[]} */ const errors = [];
    /** @type {any} */ let socket = null;
    class FakeSocket { constructor() { socket = this; } close() {} }
    const client = new LiveClient({ url: () => "ws://x/ws/skills/a-v1/", lastSeq: () => 0, onEvents: () => {},
      onMessage: (m) => seen.push(m), onError: (e) => errors.push(e), WebSocketImpl: FakeSocket });
    client.start();
    socket.onmessage({ data: JSON.stringify({ type: "card", data: { revision: 3, what: "review" } }) });
    expect(seen).toEqual([{ type: "card", data: { revision: 3, what: "review" } }]);
    expect(errors).toEqual([]);
    client.stop();
  });
});

describe("the effects chart", () => {
  const groups = [
    { kind: "lineage", label: "relu's lineage", link: "/lineages/1/", points: [
      { speedup: 1.6, what: "{plain} + OPT_VEC4", link: "/lineages/1/#state=OPT_VEC4" },
      { speedup: 0.9, what: "{OPT_X} + OPT_VEC4", link: null }] },
    { kind: "run", label: "run 4 (softmax)", link: "/runs/4/", points: [{ speedup: 2.5, what: "node #3: passed", link: "/runs/4/#node-3" }] },
    { kind: "roundtrip", label: "roundtrip, failed trials", link: null, points: [{ speedup: null, what: "relu: failed", link: null }] },
  ];
  it("puts every measured speed-up on a log axis that spans 1x, and counts the rest", () => {
    const { points, missing, domain } = effectPoints(groups);
    expect(points.map((p) => [p.row, p.speedup])).toEqual([[0, 1.6], [0, 0.9], [1, 2.5]]);
    expect(missing.map((p) => p.row)).toEqual([2]);
    expect(domain[0]).toBeLessThan(0.9);
    expect(domain[1]).toBeGreaterThan(2.5);
    expect(effectPoints([]).domain[0]).toBeLessThan(1);
  });
  it("draws a row per source and a dot per point, faster and slower apart", () => {
    const container = document.createElement("div");
    renderEffects(container, groups, { width: 600 });
    expect(container.querySelectorAll("g.effects-row").length).toBe(3);
    const dots = [...container.querySelectorAll("circle.effect-point")];
    expect(dots.map((d) => d.getAttribute("data-speedup"))).toEqual(["1.6", "0.9", "2.5"]);
    expect(dots.filter((d) => d.classList.contains("slower")).length).toBe(1);
    const x = (/** @type {Element} */ d) => Number(d.getAttribute("cx"));
    expect(x(dots[1])).toBeLessThan(x(dots[0]));
    expect(x(dots[0])).toBeLessThan(x(dots[2]));
    expect(container.querySelector(".failed-count")?.firstChild?.textContent).toBe("1 ✗");
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

describe("a card's anchor in its code", () => {
  it("numbers the excerpt from its first line and flags the anchor's lines", async () => {
    const { excerptBlock } = await import("../src/views/code.js");
    const block = excerptBlock("a\nb\nc\n", 10, [11]);
    expect(block.querySelector(".line-numbers")?.textContent).toBe("10\n▶11\n12");
    expect([...block.querySelectorAll("mark.anchor-line")].map((m) => m.textContent)).toEqual(["▶11"]);
    expect(block.querySelector("pre.code")?.textContent).toBe("a\nb\nc\n");
  });
});

describe("a card's risks and review in words", () => {
  it("says what happened for every kind of risk", () => {
    expect(riskText({ kind: "slower", task: "topk", before: "OPT_A", speedup: 0.934 })).toBe("slower in topk: 0.93x from {OPT_A}");
    expect(riskText({ kind: "slower", task: "relu", before: "" })).toBe("slower in relu: a slow-down from {plain}");
    expect(riskText({ kind: "refused_without", task: "relu", without: "GRID_STRIDE", guard: "wrong_values", message: "max error 3" }))
      .toBe("refused in relu without GRID_STRIDE (wrong_values): max error 3");
    expect(riskText({ kind: "rejected_in_lineage", task: "softmax", guard: "compile" })).toBe("rejected in softmax's lineage (compile)");
    expect(riskText({ kind: "transfer trial", task: "maxpool3d", message: "too slow" })).toBe("transfer trial on maxpool3d: too slow");
    expect(riskText({ kind: "transfer trial", task: "where" })).toBe("transfer trial on where: did not reproduce its effect");
  });

  it("says why Approve is not offered", () => {
    expect(approveWhyNot({ status: "verified", can_review: true })).toBeNull();
    expect(approveWhyNot({ status: "failed", can_review: false })).toBeNull();
    expect(approveWhyNot({ status: "failed", can_review: true })).toMatch(/roundtrip did not reproduce/);
    expect(approveWhyNot({ status: "failed", can_review: true, kind: "skeleton" })).toMatch(/admission by transfer did not/);
    expect(approveWhyNot({ status: "induced", can_review: true })).toMatch(/not tried yet/);
  });
});

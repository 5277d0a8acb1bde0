// The tree's first nodes: how the run detail's `generation` becomes the intent and the
// attempts drawn before the search's root (transforms/generation.js).
import { describe, expect, it } from "vitest";
import { generationChain, mergeExtents, placeChain } from "../src/transforms/generation.js";
import { WRITTEN } from "./fixtures.js";


describe("generationChain", () => {
  it("makes an intent node and a node per attempt but the last, which is the root", () => {
    const chain = /** @type {NonNullable<ReturnType<typeof generationChain>>} */ (generationChain(WRITTEN));

    expect(chain.nodes.map((n) => [n.id, n.kind, n.index, n.label, n.failed, n.stage])).toEqual([
      ["gen-intent", "intent", -1, "intent", false, null],
      ["gen-a1", "attempt", 0, "#a1 qwen: compile failed", true, "compile"],
      ["gen-a2", "attempt", 1, "#a2 qwen: L0 failed", true, "L0"],
    ]);
    expect(chain.rootLabel).toBe("#a3 hpc-coder: compiled");
    expect(chain.nodes[1].tip).toBe("#a1 qwen: compile failed (round 0)\nwith hpc-coder\nline 3: expected a \";\"");
    expect(chain.nodes[0].tip).toContain("relu over 2^28 floats");
  });

  it("reads a policy refusal as one, and leaves a kernel that passed first time with the intent alone", () => {
    const refused = generationChain({ intent: "x", attempts: [{ writer: "m", stage: "policy" }, { writer: "m", stage: "passed", passed: true }] });
    expect(refused?.nodes.map((n) => n.label)).toEqual(["intent", "#a1 m: policy refused"]);
    const first = generationChain({ intent: "x", attempts: [{ writer: "m", stage: "passed", passed: true }] });
    expect(first?.nodes.map((n) => n.id)).toEqual(["gen-intent"]);
  });

  it("marks the root edited when the run's creator changed the written kernel first", () => {
    const edited = generationChain({ ...WRITTEN, edited: { diff: "--- as written\n+++ as the run started\n" } });
    expect(edited?.rootLabel).toBe("#a3 hpc-coder: compiled, edited");
    expect(edited?.editedDiff).toContain("as the run started");
    expect(generationChain(WRITTEN)?.editedDiff).toBeNull();
    expect(generationChain({ ...WRITTEN, edited: null })?.rootLabel).toBe("#a3 hpc-coder: compiled");
  });

  it("gives nothing for a run not written from an intent, and refuses a generation without attempts", () => {
    expect(generationChain(null)).toBeNull();
    expect(generationChain(undefined)).toBeNull();
    expect(generationChain({ intent: "x", attempts: [] })).toBeNull();
    expect(() => generationChain({ intent: "x" })).toThrow(/list of attempts/);
  });
});

describe("placeChain", () => {
  it("puts the chain left of the root on its line, labels alternating, linked up to the root", () => {
    const chain = /** @type {NonNullable<ReturnType<typeof generationChain>>} */ (generationChain(WRITTEN));
    const placed = placeChain(chain, { x: 10, y: 40 }, { spacing: 100 });

    expect(placed.nodes.map((n) => [n.id, n.x, n.y, n.labelBelow])).toEqual([
      ["gen-intent", -290, 40, true], ["gen-a1", -190, 40, false], ["gen-a2", -90, 40, true]]);
    expect(placed.links.map((l) => [l.source.x, l.target.x])).toEqual([[-290, -190], [-190, -90], [-90, 10]]);
    expect(placed.extent).toEqual({ x0: -290, x1: 10, y0: 40, y1: 40 });
    expect(mergeExtents(placed.extent, { x0: 0, x1: 500, y0: -20, y1: 90 })).toEqual({ x0: -290, x1: 500, y0: -20, y1: 90 });
    expect(() => placeChain(chain, { x: 0, y: 0 }, { spacing: 0 })).toThrow(RangeError);
  });
});

import { describe, expect, it } from "vitest";
import { layoutTree } from "../src/transforms/layout.js";
import { chunkLinks, commonShift, placeBlocks } from "../src/transforms/stable.js";
import { stratifyRows } from "../src/transforms/stratify.js";
import { syntheticRun } from "./fixtures.js";

/** A laid-out node as layoutTree makes them (only what these functions read). */
const node = (id, parentId, depth, x, y) => /** @type {any} */ ({ id, parentId, depth, x, y, kind: "node" });
const positions = (nodes) => new Map(nodes.map((d) => [d.id, { x: d.x, y: d.y }]));

describe("commonShift", () => {
  it("finds the shift most of the nodes drawn before made", () => {
    const before = positions([node("0", null, 0, 0, 0), node("1", 0, 1, 90, -9), node("2", 0, 1, 90, 9), node("3", 0, 1, 90, 27)]);
    const after = [node("0", null, 0, 0, 9), node("1", 0, 1, 90, 0), node("2", 0, 1, 90, 18), node("3", 0, 1, 90, 36), node("4", 0, 1, 90, 54)];
    expect(commonShift(after, before)).toEqual([0, 9]);
  });

  it("keeps still when as many nodes stayed as moved together, or none were drawn", () => {
    const before = positions([node("0", null, 0, 0, 0), node("1", 0, 1, 90, 0)]);
    expect(commonShift([node("0", null, 0, 0, 0), node("1", 0, 1, 90, 18)], before)).toEqual([0, 0]);
    expect(commonShift([node("0", null, 0, 5, 5)], null)).toEqual([0, 0]);
  });
});

describe("chunkLinks", () => {
  const links = (ids) => ids.map((id) => /** @type {any} */ ({ id: String(id) }));
  const keysAndSizes = (chunks) => chunks.map((c) => [c.key, c.links.length]);

  it("cuts links into chunks of the given size, keyed by their first link", () => {
    expect(keysAndSizes(chunkLinks(links([1, 2, 3, 4, 5]), null, { size: 2 }))).toEqual([["1", 2], ["3", 2], ["5", 1]]);
  });

  it("keeps the chunks drawn before, so that a new link changes only the chunk it joins", () => {
    const before = chunkLinks(links([1, 2, 3, 4, 5, 6]), null, { size: 2 });
    const after = chunkLinks(links([1, 2, 7, 3, 4, 5, 6]), new Set(before.map((c) => c.key)), { size: 2 });
    expect(keysAndSizes(after)).toEqual([["1", 3], ["3", 2], ["5", 2]]);
  });

  it("cuts a chunk that grew to twice the size", () => {
    const after = chunkLinks(links([1, 2, 7, 8, 3]), new Set(["1", "3"]), { size: 2 });
    expect(keysAndSizes(after)).toEqual([["1", 4], ["3", 1]]);
    expect(() => chunkLinks([], null, { size: 0 })).toThrow(RangeError);
  });
});

describe("placeBlocks", () => {
  // A root with two children, each the root of a subtree of four nodes.
  const tree = (shiftOfB = 0) => [
    node("0", null, 0, 0, 0),
    node("a", "0", 1, 90, -36), node("a1", "a", 2, 180, -54), node("a2", "a", 2, 180, -36), node("a3", "a", 2, 180, -18),
    node("b", "0", 1, 90, 36 + shiftOfB), node("b1", "b", 2, 180, 18 + shiftOfB), node("b2", "b", 2, 180, 36 + shiftOfB),
    node("b3", "b", 2, 180, 54 + shiftOfB),
  ];

  it("gives the root and every subtree of at least minSize nodes a block, parents first", () => {
    const { blocks, blockOf } = placeBlocks(tree(), null, { minSize: 4 });
    expect([...blocks.values()].map((b) => [b.id, b.parent])).toEqual([["0", null], ["a", "0"], ["b", "0"]]);
    expect(blockOf.get("b2")).toBe("b");
    expect(blockOf.get("a")).toBe("a");
    expect(blocks.get("b")).toMatchObject({ x: 90, y: 36 });
  });

  it("moves a subtree the layout shifted by its block's origin alone", () => {
    const before = placeBlocks(tree(), null, { minSize: 4 });
    const shifted = tree(18);
    const after = placeBlocks(shifted, { offsets: before.blocks, positions: positions(tree()) }, { minSize: 4 });
    expect(after.blocks.get("b")).toMatchObject({ x: 90, y: 54 });
    expect(after.blocks.get("a")).toEqual(before.blocks.get("a"));
    const inBlock = (plan, d) => {
      const block = /** @type {any} */ (plan.blocks.get(plan.blockOf.get(d.id)));
      return [d.x - block.x, d.y - block.y];
    };
    for (const [i, d] of shifted.entries()) expect(inBlock(after, d)).toEqual(inBlock(before, tree()[i]));
  });

  it("keeps most of a grown 2,000-node tree in place: fewer rewrites than nodes the layout moved", () => {
    const rows = syntheticRun(2000);
    const first = layoutTree(stratifyRows(rows).root);
    const drawn = positions(first.nodes);
    const plan = placeBlocks(first.nodes, null);
    const grown = [...rows, { id: 2000, parentId: 77, state: "pending" }];
    const next = layoutTree(stratifyRows(grown).root, { previous: drawn });
    const nextPlan = placeBlocks(next.nodes, { offsets: plan.blocks, positions: drawn });
    const inBlock = (p, d) => {
      const block = /** @type {any} */ (p.blocks.get(p.blockOf.get(d.id)));
      return `${p.blockOf.get(d.id)}:${(d.x - block.x).toFixed(1)},${(d.y - block.y).toFixed(1)}`;
    };
    const old = new Map(first.nodes.map((d) => [d.id, d]));
    const moved = next.nodes.filter((d) => old.has(d.id) && (old.get(d.id)?.y !== d.y || old.get(d.id)?.x !== d.x));
    const rewritten = next.nodes.filter((d) => old.has(d.id) && inBlock(plan, old.get(d.id)) !== inBlock(nextPlan, d));
    expect(moved.length).toBeGreaterThan(200); // this node's parent makes the tidy layout shift a lot
    expect(rewritten.length).toBeLessThan(moved.length / 2);
  });
});

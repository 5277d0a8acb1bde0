import { describe, expect, it } from "vitest";
import { failedSubtrees, foldedMatches, layoutTree, levelStretch } from "../src/transforms/layout.js";
import { stratifyRows } from "../src/transforms/stratify.js";
import { bestNodeId, pathFromRoot } from "../src/transforms/best.js";
import { nodeColourScale, nodeRadiusScale, COLOURS, RADIUS } from "../src/transforms/style.js";
import { smallRun } from "./fixtures.js";

const rootOf = (rows) => /** @type {NonNullable<ReturnType<typeof stratifyRows>["root"]>} */ (stratifyRows(rows).root);

describe("layoutTree", () => {
  it("folds failed children into one stub per parent", () => {
    const { nodes, links } = layoutTree(rootOf(smallRun()));
    const ids = nodes.map((n) => n.id).sort();
    expect(ids).toEqual(["0", "1", "2", "5", "6", "failed:0"]);
    const stub = nodes.find((n) => n.kind === "failed-stub");
    expect(stub).toMatchObject({ hiddenCount: 2, parentId: 0, nodeId: null });
    expect(links).toHaveLength(5);
  });

  it("shows the failed children of an expanded parent, and all of them without folding", () => {
    expect(layoutTree(rootOf(smallRun()), { expanded: new Set([0]) }).nodes.map((n) => n.id)).toContain("3");
    expect(layoutTree(rootOf(smallRun()), { collapseFailed: false }).nodes).toHaveLength(7);
  });

  it("hides the subtree of a node collapsed by hand and counts what it hides", () => {
    const { nodes } = layoutTree(rootOf(smallRun()), { collapsed: new Set([1]) });
    expect(nodes.find((n) => n.id === "1")?.hiddenCount).toBe(2);
    expect(nodes.map((n) => n.id)).not.toContain("5");
  });

  it("places depth left to right and siblings apart", () => {
    const { nodes, extent } = layoutTree(rootOf(smallRun()), { levelSpacing: 100, nodeSpacing: 20, collapseFailed: false });
    const byId = Object.fromEntries(nodes.map((n) => [n.id, n]));
    expect(byId["0"].x).toBe(0);
    expect(byId["1"].x).toBe(100);
    expect(byId["5"].x).toBe(200);
    const siblings = ["1", "2", "3", "4"].map((id) => byId[id].y).sort((a, b) => a - b);
    for (let i = 1; i < siblings.length; i++) expect(siblings[i] - siblings[i - 1]).toBeGreaterThanOrEqual(20);
    expect(extent.x1).toBe(200);
  });

  it("spreads the levels of a tall tree to the viewport's shape, and leaves a wide one alone", () => {
    const wide = layoutTree(rootOf(smallRun()), { collapseFailed: false, levelSpacing: 100, nodeSpacing: 20, aspect: 2 });
    expect(wide.extent.x1).toBe(200); // 200 wide, 60 tall: already wider than 2:1 needs
    const tall = layoutTree(rootOf(smallRun()), { collapseFailed: false, levelSpacing: 10, nodeSpacing: 20, aspect: 2 });
    const height = tall.extent.y1 - tall.extent.y0;
    const width = tall.extent.x1 - tall.extent.x0;
    expect(width).toBeGreaterThanOrEqual(height * 2); // at least the viewport's shape, in steps of 2^(1/8)
    expect(width).toBeLessThan(height * 2 * 2 ** (1 / 8));
    expect(tall.links.every((l) => tall.nodes.some((n) => n.x === l.target.x && n.y === l.target.y))).toBe(true);
  });

  it("stretches the levels in steps, so that one more node rarely changes the stretch", () => {
    expect(levelStretch(0.5)).toBe(1);
    expect(levelStretch(2)).toBe(2);
    expect(levelStretch(2.01)).toBeCloseTo(2 * 2 ** (1 / 8));
    expect(levelStretch(2.1)).toBe(levelStretch(2.15));
  });

  it("lists nodes depth first, so that a subtree's links are neighbours", () => {
    const { nodes } = layoutTree(rootOf(smallRun()), { collapseFailed: false });
    expect(nodes.map((n) => n.id)).toEqual(["0", "1", "5", "6", "2", "3", "4"]);
  });

  it("rejects a misspelt option", () => {
    expect(() => layoutTree(rootOf(smallRun()), /** @type {any} */ ({ colapseFailed: true }))).toThrow(/unknown option "colapseFailed"/);
  });

  it("lays out nothing for no root", () => {
    expect(layoutTree(null).nodes).toEqual([]);
  });
});

describe("foldedMatches", () => {
  it("counts the matches a failed stub hides, and none for what is shown", () => {
    const { nodes } = layoutTree(rootOf(smallRun()));
    // 3 and 4 failed and are folded into failed:0; 1 is shown
    expect([...foldedMatches(nodes, new Set([1, 3, 4]))]).toEqual([["failed:0", 2]]);
    expect(foldedMatches(nodes, new Set([1, 2])).size).toBe(0);
  });

  it("counts the matches under a node collapsed by hand, down its whole subtree", () => {
    const { nodes } = layoutTree(rootOf(smallRun()), { collapsed: new Set([0]) });
    expect([...foldedMatches(nodes, new Set([0, 5, 3]))]).toEqual([["0", 2]]); // itself not counted: it shows
  });

  it("counts nothing once the fold is opened", () => {
    const { nodes } = layoutTree(rootOf(smallRun()), { expanded: new Set([0]) });
    expect(foldedMatches(nodes, new Set([3, 4])).size).toBe(0);
  });
});

describe("failedSubtrees", () => {
  it("marks nodes whose whole subtree failed, not a failed node with a passing child", () => {
    const rows = [...smallRun(), { id: 7, parentId: 3, state: "done", status: "passed", time_ms: 1 }];
    expect([...failedSubtrees(rootOf(rows))].sort()).toEqual([4]);
  });
});

describe("best path", () => {
  const rows = new Map(smallRun().map((r) => [r.id, r]));
  it("finds the fastest passing node, or the run's own best", () => {
    expect(bestNodeId(rows)).toBe(5);
    expect(bestNodeId(rows, 1)).toBe(1);
    expect(bestNodeId(rows, 3)).toBe(5); // a failed node is never best
    expect(bestNodeId(new Map())).toBeNull();
  });
  it("walks from the root to the node", () => {
    expect(pathFromRoot(rows, 5)).toEqual([0, 1, 5]);
    expect(pathFromRoot(rows, null)).toEqual([]);
    expect(pathFromRoot(rows, 99)).toEqual([]);
  });
});

describe("node style", () => {
  const rows = smallRun();
  const colour = nodeColourScale(rows);
  it("colours by status, then by reward", () => {
    expect(colour(rows[6])).toBe(COLOURS.pending);
    expect(colour(rows[3])).toBe(COLOURS.failed);
    expect(colour(rows[1])).toBe("rgb(31, 158, 110)"); // the largest reward: fully "better"
    expect(colour(rows[0])).toBe("rgb(217, 217, 217)"); // reward 0: neutral
  });
  it("sizes by visits within the radius range", () => {
    const radius = nodeRadiusScale(rows);
    expect(radius(0)).toBe(RADIUS.min);
    expect(radius(6)).toBe(RADIUS.max);
    expect(radius(3)).toBeGreaterThan(RADIUS.min);
  });
});

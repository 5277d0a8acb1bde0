// Which node labels the tree shows at a zoom (transforms/labels.js): readable at any
// zoom, never two on top of each other, the more important first.
import { describe, expect, it } from "vitest";
import { LABEL_RANK, NODE_MIN_PX, labelAnchor, labelScale, labelWidthPx, nodeScale, placeLabels } from "../src/transforms/labels.js";

/** A column of siblings 18 px apart (layout.js's nodeSpacing), labelled alike. */
function siblings(count, rank = LABEL_RANK.stub) {
  return Array.from({ length: count }, (_, i) => ({ id: `failed:${i}`, x: 90, y: 18 * i, text: "3 failed", rank }));
}

describe("labelScale", () => {
  it("keeps labels at 11 px on screen when zoomed out and lets them grow when zoomed in", () => {
    expect(labelScale(0.25)).toBe(4);
    expect(labelScale(1 / 3)).toBe(3);
    expect(labelScale(1)).toBe(1);
    expect(labelScale(4)).toBe(1);
  });
});

describe("placeLabels", () => {
  it("shows every label of siblings that are far enough apart at 100 %", () => {
    expect(placeLabels(siblings(4), 1).size).toBe(4);
  });

  it("shows fewer of them as the tree is zoomed out, never two that overlap", () => {
    const shown = (k) => [...placeLabels(siblings(40), k)].map((id) => Number(id.split(":")[1])).sort((a, b) => a - b);
    const half = shown(0.5);
    expect(half.length).toBeLessThan(40);
    // On screen the siblings are 9 px apart and a label is 15 px tall: every other one fits.
    expect(half.every((i, n) => n === 0 || i - half[n - 1] >= 2)).toBe(true);
    expect(shown(0.1).length).toBeLessThan(half.length);
    expect(shown(0.1).length).toBeGreaterThan(0);
  });

  it("places the more important label where two would overlap, whatever their order", () => {
    const root = { id: "0", x: 0, y: 0, text: "#0 806.2 µs", rank: LABEL_RANK.root };
    const best = { id: "5", x: 30, y: 4, text: "#5 450.0 µs", rank: LABEL_RANK.best };
    const hovered = { id: "9", x: 10, y: 2, text: "#9 1.2 ms", rank: LABEL_RANK.hovered };

    expect([...placeLabels([root, best], 1)]).toEqual(["5"]);
    expect([...placeLabels([best, root], 1)]).toEqual(["5"]);
    expect([...placeLabels([root, best, hovered], 1)]).toEqual(["9"]);
  });

  it("places a fold's label that tells of hidden search matches before a shown match's", () => {
    const match = { id: "7", x: 0, y: 0, text: "#7 1.0 ms", rank: LABEL_RANK.match };
    const stub = { id: "failed:3", x: 10, y: 2, text: "3 failed · 2 matches", rank: LABEL_RANK.holdsMatch };
    expect([...placeLabels([match, stub], 1)]).toEqual(["failed:3"]);
  });

  it("judges overlap on screen: labels apart at 100 % may meet at 10 %", () => {
    const a = { id: "1", x: 0, y: 0, text: "#1 1.0 ms", rank: LABEL_RANK.match };
    const b = { id: "2", x: 0, y: 40, text: "#2 1.0 ms", rank: LABEL_RANK.match };
    expect(placeLabels([a, b], 1).size).toBe(2);
    expect([...placeLabels([a, b], 0.1)]).toEqual(["1"]);
  });

  it("refuses a zoom that is not a positive number", () => {
    expect(() => placeLabels([], 0)).toThrow(/positive/);
  });
});

describe("nodeScale", () => {
  it("keeps the smallest circle NODE_MIN_PX on screen when zoomed out, and never larger than at 100 %", () => {
    expect(nodeScale(1, 3)).toBe(1);
    expect(nodeScale(4, 3)).toBe(1);
    expect(nodeScale(0.9, 3)).toBe(1); // 3 px * 0.9 is still more than the minimum
    const k = 0.2;
    expect(3 * k * nodeScale(k, 3)).toBeCloseTo(NODE_MIN_PX, 1);
    expect(nodeScale(0.5, 10)).toBe(1);
    expect(nodeScale(0.02, 1)).toBe(50); // capped at 1/k: as large as at 100 %, no larger
  });
});

describe("labelAnchor", () => {
  it("centres a label that fits, ends it at its node by the right edge, starts it there by the left", () => {
    const width = labelWidthPx("#13 300.0 µs", 0.3);
    expect(width).toBeCloseTo(12 * 6.3, 0); // 11 px on screen whatever the zoom below 100 % (a hundredth rounded)
    expect(labelAnchor(400, width, 800)).toBe("middle");
    expect(labelAnchor(790, width, 800)).toBe("end");
    expect(labelAnchor(10, width, 800)).toBe("start");
    expect(labelAnchor(30, 200, 100)).toBe("middle"); // wider than the frame: nothing helps
  });
});

// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { defaultQuery, matchingIds, PAGE, screenedFasterNote, tableRows, toggleSort } from "../src/transforms/nodeTable.js";

const ROWS = [
  { id: 0, parentId: null, state: "done", status: "passed", time_ms: 0.9, source: "root", title: "naive", level: "full" },
  { id: 1, parentId: 0, state: "done", status: "passed", time_ms: 0.4, source: "rewrite:vectorize", title: "float4", level: "full", reward: 0.5 },
  { id: 2, parentId: 0, state: "done", status: "rejected", guard: "wrong_values", source: "llm:m", title: "unsafe" },
  { id: 3, parentId: 1, state: "done", status: "passed", time_ms: 0.6, source: "tunable", title: "BLOCK=512", level: "screen" },
  { id: 4, parentId: 1, state: "pending", source: "tunable", title: "BLOCK=128" },
];

describe("the node table", () => {
  it("sorts by time, fastest first, with unmeasured nodes last", () => {
    expect(tableRows(ROWS, defaultQuery()).rows.map((r) => r.id)).toEqual([1, 3, 0, 2, 4]);
    const slowest = toggleSort(defaultQuery(), "time_ms");
    expect(tableRows(ROWS, slowest).rows.map((r) => r.id)).toEqual([0, 3, 1, 2, 4]);
  });

  it("filters by words over id, source, title and guard, and by status and level", () => {
    expect(tableRows(ROWS, { ...defaultQuery(), text: "tunable 512" }).rows.map((r) => r.id)).toEqual([3]);
    expect(tableRows(ROWS, { ...defaultQuery(), text: "WRONG_values" }).rows.map((r) => r.id)).toEqual([2]);
    expect(tableRows(ROWS, { ...defaultQuery(), text: "#4" }).rows.map((r) => r.id)).toEqual([4]);
    expect(tableRows(ROWS, { ...defaultQuery(), status: "failed" }).rows.map((r) => r.id)).toEqual([2]);
    expect(tableRows(ROWS, { ...defaultQuery(), level: "screen" })).toMatchObject({ matched: 1, total: 5 });
  });

  it("sorts text columns alphabetically and turns round on a second click", () => {
    const bySource = toggleSort(defaultQuery(), "source");
    expect(tableRows(ROWS, bySource).rows.map((r) => r.source)).toEqual(["llm:m", "rewrite:vectorize", "root", "tunable", "tunable"]);
    expect(toggleSort(bySource, "source").descending).toBe(true);
    expect(toggleSort(defaultQuery(), "reward").descending).toBe(true); // the best reward first
  });

  it("draws one page of a large run and says how many matched", () => {
    const many = Array.from({ length: 5000 }, (_, id) => ({ id, parentId: id ? 0 : null, state: "done", status: "passed", time_ms: 1 + (id % 97) }));
    const { rows, matched, total } = tableRows(many, defaultQuery());
    expect(rows).toHaveLength(PAGE);
    expect([matched, total]).toEqual([5000, 5000]);
    expect(rows[0].time_ms).toBe(1);
  });
});

describe("a screened node faster than the best", () => {
  it("says in its row that the screen found it too little faster to be given the full gate", () => {
    const screened = { level: "screen", status: "passed", time_ms: 0.495 };
    expect(screenedFasterNote(screened, 0.5, 0.02))
      .toBe("screened only: 1% faster than the best full-gate time, not the more than 2% that earns the full gate");
    expect(screenedFasterNote(screened, 0.5, null)).toBe("screened only: 1% faster than the best full-gate time");
    expect(screenedFasterNote({ ...screened, time_ms: 0.5 }, 0.5, 0.02)).toBeNull(); // not faster
    expect(screenedFasterNote({ ...screened, level: "full" }, 0.5, 0.02)).toBeNull(); // the full gate's
    expect(screenedFasterNote({ ...screened, status: "failed" }, 0.5, 0.02)).toBeNull();
    expect(screenedFasterNote(screened, null, 0.02)).toBeNull(); // no best yet
  });

  it("marks the row's level with the note, and redraws when the best changes", async () => {
    const { NodeTable } = await import("../src/views/nodeTable.js");
    const container = document.createElement("div");
    const table = new NodeTable(container, { onSelect: () => {} });
    const rows = [{ id: 0, parentId: null, state: "done", status: "passed", level: "full", time_ms: 0.8, title: "root" },
      { id: 1, parentId: 0, state: "done", status: "passed", level: "full", time_ms: 0.5, title: "best" },
      { id: 2, parentId: 1, state: "done", status: "passed", level: "screen", time_ms: 0.495, title: "close" }];
    table.render(rows, null, 1, { bestMs: 0.5, margin: 0.02 });
    const cell = container.querySelector('tr[data-node-id="2"] td.screened-faster');
    expect(cell?.getAttribute("title")).toMatch(/^screened only: 1% faster than the best full-gate time, not the more than 2%/);
    expect(container.querySelectorAll("td.screened-faster")).toHaveLength(1);
    table.render(rows, null, 1, { bestMs: 0.49, margin: 0.02 }); // a new best, from the full gate
    expect(container.querySelectorAll("td.screened-faster")).toHaveLength(0);
  });
});

describe("the node table's view", () => {
  it("filters again from the rows it was given, clicks select, and redraws only on change", async () => {
    const { NodeTable } = await import("../src/views/nodeTable.js");
    const container = document.createElement("div");
    const picked = [];
    const table = new NodeTable(container, { onSelect: (id) => picked.push(id) });
    const rows = new Map(ROWS.map((r) => [r.id, r]));
    table.render(rows.values(), null, 1); // an iterator, as the session page passes it
    expect(container.querySelectorAll("tbody tr")).toHaveLength(5);
    table.update({ text: "tunable" });
    expect([...container.querySelectorAll("tbody tr")].map((tr) => tr.getAttribute("data-node-id"))).toEqual(["3", "4"]);
    /** @type {HTMLElement} */ (container.querySelector('tr[data-node-id="4"]')).click();
    expect(picked).toEqual([4]);
    const body = container.querySelector("tbody");
    table.render(rows.values(), null, 1);
    expect(container.querySelector("tbody")).toBe(body); // same version: nothing rebuilt
    expect(container.querySelector(".node-count")?.textContent).toBe("2 of 5 nodes");
  });

  it("links the whole table's CSV and JSON when it is given where they are, and nothing otherwise", async () => {
    const { NodeTable } = await import("../src/views/nodeTable.js");
    const withLinks = document.createElement("div");
    new NodeTable(withLinks, { onSelect: () => {}, downloads: { csv: "/api/runs/7/nodes.csv", json: "/api/runs/7/nodes.json" } });
    const links = [...withLinks.querySelectorAll("a[data-download]")];
    expect(links.map((a) => [a.textContent, a.getAttribute("href"), a.hasAttribute("download")])).toEqual([
      ["CSV", "/api/runs/7/nodes.csv", true], ["JSON", "/api/runs/7/nodes.json", true]]);
    const without = document.createElement("div");
    new NodeTable(without, { onSelect: () => {} });
    expect(without.querySelector("a[data-download]")).toBeNull();
  });

  it("gives the tree every node its search matches, past the first page, by the table's rule", () => {
    expect(matchingIds(ROWS, defaultQuery())).toBeNull(); // nothing asked: nothing to highlight
    expect([...(matchingIds(ROWS, { ...defaultQuery(), text: "block" }) ?? [])]).toEqual([3, 4]);
    expect([...(matchingIds(ROWS, { ...defaultQuery(), status: "failed" }) ?? [])]).toEqual([2]);
    expect(matchingIds(ROWS, { ...defaultQuery(), text: "nothing like it" })?.size).toBe(0);
    const many = Array.from({ length: PAGE + 50 }, (_, id) => ({ id, parentId: null, state: "done", status: "passed", title: "same" }));
    const query = { ...defaultQuery(), text: "same" };
    expect(matchingIds(many, query)?.size).toBe(PAGE + 50);
    expect(tableRows(many, query).matched).toBe(PAGE + 50);
  });
});

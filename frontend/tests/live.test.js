import { describe, expect, it } from "vitest";
import { LiveClient, runSocketUrl } from "../src/live.js";

/** A WebSocket stand-in the test drives by hand. */
function fakeSockets() {
  /** @type {any[]} */
  const opened = [];
  class FakeSocket {
    /** @param {string} url */
    constructor(url) {
      this.url = url;
      this.closed = false;
      /** @type {any} */ this.onclose = null;
      /** @type {any} */ this.onmessage = null;
      opened.push(this);
    }
    close() {
      this.closed = true;
      this.onclose?.({});
    }
    serverSends(message) {
      this.onmessage?.({ data: JSON.stringify(message) });
    }
    drop() {
      this.onclose?.({});
    }
  }
  return { FakeSocket, opened };
}

function fakeTimers() {
  /** @type {Array<{fn: () => void, ms: number}>} */
  const pending = [];
  return {
    pending,
    setTimeoutImpl: (fn, ms) => { pending.push({ fn, ms }); return pending.length; },
    clearTimeoutImpl: () => {},
    runNext() { pending.shift()?.fn(); },
  };
}

/**
 * @param {{FakeSocket: any, timers: ReturnType<typeof fakeTimers>, state: {lastSeq: number},
 *   statuses: any[], errors?: string[]}} parts
 */
function client({ FakeSocket, timers, state, statuses, errors = [] }) {
  return new LiveClient({
    url: (after) => `ws://test/ws/runs/1/?after=${after}`,
    lastSeq: () => state.lastSeq,
    onEvents: (events) => { for (const e of events) state.lastSeq = Math.max(state.lastSeq, e.seq); },
    onStatus: (s, detail) => statuses.push([s, detail?.delay]),
    onError: (e) => errors.push(e.message),
    WebSocketImpl: FakeSocket,
    setTimeoutImpl: timers.setTimeoutImpl,
    clearTimeoutImpl: timers.clearTimeoutImpl,
    backoff: { initialMs: 100, jitter: 0 },
  });
}

describe("LiveClient", () => {
  it("connects from the last seq it has, and reconnects from the newer one after a drop", () => {
    const { FakeSocket, opened } = fakeSockets();
    const timers = fakeTimers();
    const state = { lastSeq: 3 };
    const statuses = [];
    const live = client({ FakeSocket, timers, state, statuses });
    live.start();
    expect(opened[0].url).toBe("ws://test/ws/runs/1/?after=3");
    opened[0].serverSends({ type: "events", data: [{ seq: 4, kind: "node_added", data: {} }, { seq: 5, kind: "node_added", data: {} }] });
    opened[0].serverSends({ type: "synced", data: { last_seq: 5 } });
    opened[0].drop();
    expect(timers.pending[0].ms).toBe(100);
    timers.runNext();
    expect(opened[1].url).toBe("ws://test/ws/runs/1/?after=5");
    expect(statuses.map(([s]) => s)).toEqual(["connecting", "synced", "retrying", "connecting"]);
  });

  it("backs off further while the server stays away, and starts afresh once synced", () => {
    const { FakeSocket, opened } = fakeSockets();
    const timers = fakeTimers();
    const live = client({ FakeSocket, timers, state: { lastSeq: 0 }, statuses: [] });
    live.start();
    opened[0].drop();
    timers.runNext();
    opened[1].drop();
    timers.runNext();
    opened[2].drop();
    expect(timers.pending.map((t) => t.ms)).toEqual([400]);
    timers.runNext();
    opened[3].serverSends({ type: "synced", data: {} });
    opened[3].drop();
    expect(timers.pending.map((t) => t.ms)).toEqual([100]);
  });

  it("stops for good when asked, and reports messages it cannot read", () => {
    const { FakeSocket, opened } = fakeSockets();
    const timers = fakeTimers();
    /** @type {string[]} */
    const errors = [];
    const live = client({ FakeSocket, timers, state: { lastSeq: 0 }, statuses: [], errors });
    live.start();
    opened[0].onmessage({ data: "not json" });
    opened[0].serverSends({ type: "mystery" });
    live.stop();
    expect(opened[0].closed).toBe(true);
    expect(timers.pending).toEqual([]);
    expect(errors).toHaveLength(2);
  });

  it("resyncs by reconnecting at once from the last seq (after a gap)", () => {
    const { FakeSocket, opened } = fakeSockets();
    const timers = fakeTimers();
    const state = { lastSeq: 7 };
    const live = client({ FakeSocket, timers, state, statuses: [] });
    live.start();
    live.resync();
    expect(opened).toHaveLength(2);
    expect(opened[0].closed).toBe(true);
    expect(opened[1].url).toMatch(/after=7$/);
    expect(timers.pending).toEqual([]); // the old socket's close does not schedule a retry
  });

  it("rejects a misspelt option", () => {
    expect(() => new LiveClient(/** @type {any} */ ({ url: () => "", lastSeq: () => 0, onEvents: () => {}, onEvent: () => {} })))
      .toThrow(/unknown option "onEvent"/);
  });

  it("builds the socket address on the page's host, with the share token when shared", () => {
    const location = /** @type {any} */ ({ protocol: "https:", host: "studio.example:8443" });
    expect(runSocketUrl(4, 10, null, location)).toBe("wss://studio.example:8443/ws/runs/4/?after=10&progress=1");
    expect(runSocketUrl(4, 0, "a b", { ...location, protocol: "http:" })).toBe("ws://studio.example:8443/ws/runs/4/?after=0&progress=1&share=a%20b");
  });
});

describe("LiveClient refusals", () => {
  it("does not retry when the server refuses the run (close code 4404)", () => {
    const { FakeSocket, opened } = fakeSockets();
    const timers = fakeTimers();
    const statuses = [];
    const live = client({ FakeSocket, timers, state: { lastSeq: 0 }, statuses });
    live.start();
    opened[0].onclose({ code: 4404 });
    expect(timers.pending).toEqual([]);
    expect(statuses.map(([s]) => s)).toEqual(["connecting", "refused"]);
  });
});

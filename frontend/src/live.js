// The websocket side of a live run: connect with ?after=<last seq we have>, hand every
// message to the page, and on a drop reconnect with backoff, resuming from the last seq
// (the server replays what was missed from its event log, then streams).
import { backoffDelay } from "./transforms/backoff.js";
import { checkOptions } from "./transforms/options.js";
import { withTeam } from "./transforms/skills.js";

/**
 * @typedef {"connecting"|"open"|"synced"|"retrying"|"refused"|"stopped"} LiveStatus
 */

/** Close codes of search.consumers: 4404 no such run or not yours, 4400 a bad request. */
const REFUSED_CODES = new Set([4400, 4404]);

export class LiveClient {
  /**
   * @param {{url: (after: number) => string, lastSeq: () => number,
   *   onEvents: (events: any[]) => void, onSynced?: (data: any) => void,
   *   onStatus?: (status: LiveStatus, detail?: any) => void, onError?: (error: Error) => void,
   *   onMessage?: ((message: {type: string, data: any}) => void)|null,
   *   WebSocketImpl?: any, setTimeoutImpl?: any, clearTimeoutImpl?: any,
   *   backoff?: Record<string, number>, random?: () => number}} options
   */
  constructor(options) {
    const o = checkOptions("LiveClient", options, {
      url: { type: "function" },
      lastSeq: { type: "function" },
      onEvents: { type: "function" },
      onSynced: { type: "function", default: () => {} },
      onStatus: { type: "function", default: () => {} },
      onError: { type: "function", default: (error) => console.error(error) },
      // Messages of other types (a skill card's socket sends "card"); without it they are errors.
      onMessage: { type: "function", default: null },
      WebSocketImpl: { type: "any", default: globalThis.WebSocket },
      setTimeoutImpl: { type: "function", default: globalThis.setTimeout.bind(globalThis) },
      clearTimeoutImpl: { type: "function", default: globalThis.clearTimeout.bind(globalThis) },
      backoff: { type: "object", default: {} },
      random: { type: "function", default: Math.random },
    });
    this.o = o;
    this.socket = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.timer != null) this.o.clearTimeoutImpl(this.timer);
    this.timer = null;
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close();
    this.o.onStatus("stopped");
  }

  /** Drop the connection and open a new one from the last seq now (after a gap, say). */
  resync() {
    if (this.stopped) return;
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close();
    if (this.timer != null) this.o.clearTimeoutImpl(this.timer);
    this.timer = null;
    this.connect();
  }

  connect() {
    const url = this.o.url(this.o.lastSeq());
    this.o.onStatus("connecting", { url, attempt: this.attempt });
    const socket = new this.o.WebSocketImpl(url);
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket === socket) this.o.onStatus("open");
    };
    socket.onmessage = (message) => {
      if (this.socket === socket) this.receive(message.data);
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      if (REFUSED_CODES.has(event?.code)) {
        // The server said no (no such run, not ours to see, a bad request): retrying won't help.
        this.socket = null;
        this.stopped = true;
        this.o.onStatus("refused", { code: event.code });
        return;
      }
      this.retry();
    };
    socket.onerror = () => {
      // A close event follows an error; retrying happens there, once.
    };
  }

  receive(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch (error) {
      this.o.onError(new Error(`a websocket message that is not JSON: ${String(text).slice(0, 80)} (${error})`));
      return;
    }
    if (message.type === "events") {
      this.o.onEvents(Array.isArray(message.data) ? message.data : []);
    } else if (message.type === "synced") {
      this.attempt = 0; // a healthy connection: the next drop starts the backoff afresh
      this.o.onStatus("synced", message.data);
      this.o.onSynced(message.data);
    } else if (this.o.onMessage) {
      this.attempt = 0;
      this.o.onMessage(message);
    } else {
      this.o.onError(new Error(`an unknown websocket message type ${JSON.stringify(message.type)}`));
    }
  }

  retry() {
    this.socket = null;
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.o.backoff, this.o.random);
    this.attempt += 1;
    this.o.onStatus("retrying", { delay, attempt: this.attempt });
    this.timer = this.o.setTimeoutImpl(() => {
      this.timer = null;
      if (!this.stopped) this.connect();
    }, delay);
  }
}

/**
 * ws://host/ws/skills/<card id>/[?team=id], on the page's own host: a card's changes.
 * @param {string} cardId
 * @param {string|null} team
 * @param {{protocol: string, host: string}} [location]
 */
export function cardSocketUrl(cardId, team, location = window.location) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}${withTeam(`/ws/skills/${encodeURIComponent(cardId)}/`, team)}`;
}

/**
 * ws://host/ws/runs/<id>/?after=N&progress=1[&share=token], on the page's own host: the
 * run's events from seq N on, and its progress frames (search.consumers).
 * @param {number} runId
 * @param {number} after
 * @param {string|null} [shareToken]
 * @param {{protocol: string, host: string}} [location]
 */
export function runSocketUrl(runId, after, shareToken = null, location = window.location) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const share = shareToken ? `&share=${encodeURIComponent(shareToken)}` : "";
  return `${scheme}://${location.host}/ws/runs/${runId}/?after=${after}&progress=1${share}`;
}

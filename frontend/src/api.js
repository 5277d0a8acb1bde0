// JSON over fetch to the Django API, with Django's CSRF token on writes.

export class ApiError extends Error {
  /** @param {number} status @param {any} body @param {string} url */
  constructor(status, body, url) {
    const detail = body && typeof body === "object" && typeof body.detail === "string" ? `: ${body.detail}` : "";
    super(`${url} answered ${status}${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

/** The token from the page's <meta name="csrf-token">, else Django's csrftoken cookie. */
export function csrfToken(doc = document) {
  const meta = doc.querySelector('meta[name="csrf-token"]');
  const fromMeta = meta?.getAttribute("content");
  if (fromMeta && fromMeta !== "NOTPROVIDED") return fromMeta;
  const cookie = doc.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : "";
}

/**
 * @param {string} url
 * @param {{method?: string, body?: any, fetchImpl?: typeof fetch}} [options]
 */
export async function api(url, { method = "GET", body, fetchImpl = fetch } = {}) {
  /** @type {Record<string, string>} */
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetchImpl(url, { method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text; // an HTML error page, say: kept as text for the message
    }
  }
  if (!response.ok) throw new ApiError(response.status, parsed, url);
  return parsed;
}

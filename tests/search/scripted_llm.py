"""A real OpenAI-compatible HTTP endpoint on 127.0.0.1 that answers from a script.

Each POST /v1/chat/completions consumes the next step: a reply (with usage tokens),
a malformed reply, a reply that arrives too late, or an HTTP error. Every request body
is recorded so tests can assert on the prompts. The real `openai` client talks to it
over a real socket, so timeouts, status codes and JSON parsing are exercised as they
would be against a hosted model.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Step:
    content: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: int = 200
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


def reply(content: str | dict[str, Any], *, prompt_tokens: int = 100, completion_tokens: int = 50) -> Step:
    """A well-formed completion whose message content is `content` (dicts become JSON)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Step(content=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def malformed(content: str = "Sure! The kernel is memory-bound.", **tokens: int) -> Step:
    """A completion whose content is not the JSON asked for (or not of its schema)."""
    return reply(content, **tokens)


def slow(delay_s: float, then: Step | None = None) -> Step:
    """Wait `delay_s` before answering: longer than the client's timeout, it times out."""
    base = then or reply({"late": True})
    return Step(base.content, base.prompt_tokens, base.completion_tokens, base.status, delay_s)


def http_error(status: int, message: str = "scripted failure", retry_after: str | None = None) -> Step:
    headers = (("Retry-After", retry_after),) if retry_after is not None else ()
    return Step(content=message, status=status, headers=headers)


class ScriptedLLM:
    """Start, feed steps with `script(...)`, point a client at `base_url`, stop."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # request bodies, in arrival order
        self.headers: list[dict[str, str]] = []
        self._steps: list[Step] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # A slow step's thread may still be sleeping at shutdown: never wait for it.
        self._server.daemon_threads = True
        self._server.block_on_close = False
        # A short poll interval: stop() waits up to one interval for the serving loop.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps)

    def script(self, *steps: Step) -> ScriptedLLM:
        with self._lock:
            self._steps.extend(steps)
        return self

    def prompts(self) -> list[str]:
        """The last message (the user prompt) of each request."""
        return [body["messages"][-1]["content"] for body in self.requests]

    def start(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Step:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self._steps:
                return http_error(500, "the script ran out of steps")
            return self._steps.pop(0)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                step = scripted._next(body, {k.lower(): v for k, v in self.headers.items()})
                if step.delay_s and scripted._stopping.wait(step.delay_s):
                    return
                if step.status != 200:
                    error = {"message": step.content, "type": "scripted", "code": step.status}
                    self._send(step.status, {"error": error}, step.headers)
                    return
                self._send(200, _completion(body.get("model", "?"), step))

            def _send(self, status: int, payload: dict[str, Any],
                      headers: tuple[tuple[str, str], ...] = ()) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timed out) before a slow step answered

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep pytest's output for failures

        return Handler


def _completion(model: str, step: Step) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": step.content}}],
        "usage": {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                  "total_tokens": step.prompt_tokens + step.completion_tokens},
    }


@pytest.fixture(name="llm_server")
def llm_server_fixture() -> Iterator[ScriptedLLM]:
    """A started ScriptedLLM, stopped after the test. Import this function into a test
    module (or a conftest) to use the fixture `llm_server`."""
    server = ScriptedLLM().start()
    try:
        yield server
    finally:
        server.stop()


# A kernel a model might write for the relu task from an intent, with its plan: what the
# scripted server answers in the tests of writing a kernel (engine, API and browser).
WRITTEN_RELU = """\
extern "C" __global__ void relu_grid(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}
"""
WRITTEN_RELU_PLAN = {"launches": [{"kernel": "relu_grid", "grid": ["min(cdiv(n, 256), 1056)"],
                                   "block": [256], "args": ["x", "y", "i64:n"]}]}


def written_relu(source: str = WRITTEN_RELU) -> dict[str, Any]:
    """The model's answer to a request to write a kernel, as JSON."""
    return {"title": "grid-stride relu", "rationale": "one coalesced pass.", "source": source,
            "plan": WRITTEN_RELU_PLAN}

"""The experts that can write a kernel, from configuration.

Configuration is a list of objects (settings.OPTIML_GENERATION_EXPERTS, read from the
environment variable of the same name as JSON, or from the file it names):

    [{"name": "qwen-coder", "kind": "api", "base_url": "http://gpu-host:8000/v1",
      "model": "Qwen/Qwen2.5-Coder-32B-Instruct", "api_key_env": "QWEN_KEY",
      "about": "general code model, strong at C++"},
     {"name": "hpc-coder", "kind": "local", "path": "/models/HPC-Coder-V2-6.7B",
      "about": "trained on parallel code: OpenMP, MPI, CUDA"}]

`about` is what the router reads besides the outcomes (its text is embedded with the
task's). Local models are loaded from their path (or the local Hugging Face cache for a
hub id) with local_files_only: nothing is ever downloaded.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search.engine.judges.prompts import MalformedReply
from search.engine.types import JudgeError

from .writing import WriteFailed, Written, read_fenced, read_json

KINDS = ("api", "local")


class ExpertConfigError(ValueError):
    """The experts' configuration is wrong; the message names the entry and the field."""


@dataclass(frozen=True)
class ExpertSpec:
    name: str
    kind: str
    about: str = ""
    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    path: str = ""  # local: a directory, or a hub id already in the local cache
    timeout_s: float = 120.0
    max_retries: int = 1
    max_new_tokens: int = 2048

    def public(self) -> dict[str, Any]:
        """What the UI and logs may show (never the key)."""
        return {"name": self.name, "kind": self.kind, "about": self.about,
                "model": self.model or self.path}


def parse_experts(entries: Any, environ: Mapping[str, str] | None = None) -> list[ExpertSpec]:
    """Validated specs, in the configured order (the router's default order)."""
    env = os.environ if environ is None else environ
    if entries in (None, ""):
        return []
    if not isinstance(entries, list):
        raise ExpertConfigError("the experts must be a JSON list of objects")
    specs: list[ExpertSpec] = []
    for index, entry in enumerate(entries):
        where = f"expert {index + 1}"
        if not isinstance(entry, dict):
            raise ExpertConfigError(f"{where} must be an object")
        name = str(entry.get("name") or "").strip()
        if not name or not all(c.isalnum() or c in "-_.:" for c in name):
            raise ExpertConfigError(f"{where}: 'name' must be letters, digits, - _ . or :")
        where = f"expert {name!r}"
        if name in {s.name for s in specs}:
            raise ExpertConfigError(f"{where} is configured twice")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise ExpertConfigError(f"{where}: 'kind' must be one of {', '.join(KINDS)}")
        unknown = set(entry) - {"name", "kind", "about", "base_url", "model", "api_key_env", "path",
                                "timeout_s", "max_retries", "max_new_tokens"}
        if unknown:
            raise ExpertConfigError(f"{where}: unknown fields {', '.join(sorted(unknown))}")
        common = {"name": name, "kind": kind, "about": str(entry.get("about") or ""),
                  "timeout_s": _positive(entry, "timeout_s", 120.0, where),
                  "max_retries": int(_positive(entry, "max_retries", 1, where, zero=True)),
                  "max_new_tokens": int(_positive(entry, "max_new_tokens", 2048, where))}
        if kind == "api":
            for key in ("base_url", "model"):
                if not str(entry.get(key) or "").strip():
                    raise ExpertConfigError(f"{where}: an API expert needs '{key}'")
            key_env = str(entry.get("api_key_env") or "").strip()
            api_key = env.get(key_env, "").strip() if key_env else "none"
            if key_env and not api_key:
                raise ExpertConfigError(f"{where}: the environment variable {key_env} is not set")
            specs.append(ExpertSpec(**common, base_url=str(entry["base_url"]).strip(),
                                    model=str(entry["model"]).strip(), api_key=api_key))
        else:
            path = str(entry.get("path") or "").strip()
            if not path:
                raise ExpertConfigError(f"{where}: a local expert needs 'path' (a directory or hub id)")
            specs.append(ExpertSpec(**common, path=path))
    return specs


def _positive(entry: dict, key: str, default: float, where: str, zero: bool = False) -> float:
    value = entry.get(key, default)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or value < 0 or (value == 0 and not zero):
        raise ExpertConfigError(f"{where}: '{key}' must be a {'non-negative' if zero else 'positive'} number")
    return float(value)


class ApiExpert:
    """An expert behind an OpenAI-compatible endpoint. The LLM judge's client does the
    talking: retries with backoff, timeouts, token accounting and the transcript."""

    kind = "api"

    def __init__(self, spec: ExpertSpec, client: Any = None) -> None:
        self.spec = spec
        self.name = spec.name
        # The LLM module (and `openai`) loads only when an API expert is built, so a host
        # without the package still serves the app and the rule judge.
        from search.engine.judges import LLMConfigError, LLMJudge

        try:
            self.llm = LLMJudge(base_url=spec.base_url, model=spec.model, api_key=spec.api_key,
                                timeout_s=spec.timeout_s, max_retries=spec.max_retries, client=client,
                                backoff_s=0.2)
        except LLMConfigError as error:
            raise ExpertConfigError(f"expert {spec.name!r}: {error}") from None

    def write(self, messages: list[dict[str, str]], purpose: str = "write") -> Written:
        try:
            return self.llm.ask(purpose, messages, lambda text: read_json(self.name, text))
        except JudgeError as error:
            last = self.llm.transcript[-1] if self.llm.transcript else {}
            stage = "reply" if last.get("reply") else "endpoint"
            raise WriteFailed(stage, f"{self.name}: {error}") from None


class LocalExpert:
    """A local causal LM (transformers), loaded on first use from local files only. It
    continues a plain-text prompt (`writing.fenced_prompt`) and is read in the fenced
    format. `model` and `tokenizer` may be given directly (tests build tiny ones)."""

    kind = "local"

    def __init__(self, spec: ExpertSpec, *, model: Any = None, tokenizer: Any = None,
                 device: str | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self._model, self._tokenizer, self._device = model, tokenizer, device

    def load(self) -> tuple[Any, Any]:
        if self._model is None:
            self._model, self._tokenizer = load_local(self.spec.path, self._device)
        return self._model, self._tokenizer

    def generate_text(self, prompt: str, *, max_new_tokens: int | None = None, seed: int = 0) -> str:
        import torch

        model, tokenizer = self.load()
        torch.manual_seed(seed)
        ids = torch.tensor([tokenizer.encode(prompt)], device=next(model.parameters()).device)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_new_tokens or self.spec.max_new_tokens,
                                 do_sample=False, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id)
        return tokenizer.decode(out[0, ids.shape[1]:].tolist())

    def write_prompt(self, prompt: str) -> Written:
        text = self.generate_text(prompt)
        try:
            return read_fenced(self.name, text)
        except MalformedReply as fenced_error:
            try:  # a chat-tuned model may answer in the JSON it was shown
                return read_json(self.name, text)
            except MalformedReply:
                raise WriteFailed("reply", f"{self.name}: {fenced_error}") from None

    def write(self, messages: list[dict[str, str]], purpose: str = "write") -> Written:
        """The chat messages as one plain prompt, read in either format."""
        prompt = "\n\n".join(m["content"] for m in messages)
        return self.write_prompt(prompt + "\n\nAnswer as: title, approach, the source in a ```cuda "
                                 "fence, the plan in a ```json fence.\n\n")


# Local models kept loaded in this process, newest last: a writing job (a CPU worker's
# Celery task) would otherwise read the same weights from disk for every intent.
LOCAL_MODELS_KEPT = 2
_LOADED: OrderedDict[tuple[str, str, float], tuple[Any, Any]] = OrderedDict()
_LOADED_LOCK = threading.Lock()


def load_local(path: str, device: str | None = None) -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a directory or the local cache, frozen, in
    eval mode. Raises ExpertConfigError when they are not there (never downloads). The
    last LOCAL_MODELS_KEPT loaded are kept and shared (frozen, they are only read), keyed
    by path, device and the time the directory's config.json last changed, so weights
    replaced on disk are read again."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    config = Path(path) / "config.json"
    key = (path, device, config.stat().st_mtime if config.is_file() else 0.0)
    with _LOADED_LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
    loaded = _load_local(path, device)
    with _LOADED_LOCK:
        _LOADED[key] = loaded
        while len(_LOADED) > LOCAL_MODELS_KEPT:
            _LOADED.popitem(last=False)
    return loaded


def _load_local(path: str, device: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, torch_dtype="auto")
    except (OSError, ValueError) as error:
        raise ExpertConfigError(f"the local model {path!r} cannot be loaded from local files: "
                                f"{str(error).splitlines()[0][:200]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model, tokenizer


def build_experts(specs: Sequence[ExpertSpec],
                  clients: Mapping[str, Any] | None = None) -> dict[str, ApiExpert | LocalExpert]:
    """The expert objects, by name (nothing is loaded or contacted yet)."""
    clients = clients or {}
    return {s.name: ApiExpert(s, clients.get(s.name)) if s.kind == "api" else LocalExpert(s)
            for s in specs}

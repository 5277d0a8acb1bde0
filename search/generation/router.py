"""The router: which experts write a task's kernel, and which of them is the primary.

After the Mixture-of-Thoughts router (Fein-Ashley et al., arXiv 2509.21164): a frozen
sentence encoder embeds the intent and the task's contract (`writing.intent_text`); a
small MLP scores each expert; the top-K are the active set, the highest-scoring one the
primary. The MLP learns from the product's own outcomes (`targets`): which expert's
kernel compiled, passed L0, and how fast it ran. Until it has learned from at least
`MIN_OUTCOMES` outcomes, routing follows the configured order and says so.

Encoders: `HashingEncoder` needs no weights (hashed word uni- and bigrams, the
"hashing trick"), so routing works on a machine with no model at all;
`TransformersEncoder` mean-pools a local sentence-embedding model (e.g. a MiniLM).
Both are frozen: only the MLP is trained.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from .routing import ConfiguredOrder, Routing

MIN_OUTCOMES = 8


class Encoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> torch.Tensor: ...  # (n, dim), frozen


class HashingEncoder:
    """Hashed word uni- and bigrams with signs, L2-normalised: a fixed embedding that
    needs no weights (two texts sharing words land near each other)."""

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        out = torch.zeros(len(texts), self.dim)
        for row, text in enumerate(texts):
            words = re.findall(r"[a-z_]+|\d+", text.lower())
            for gram in [*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))]:
                digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dim
                out[row, index] += 1.0 if digest[4] & 1 else -1.0
        return nn.functional.normalize(out, dim=1)


class TransformersEncoder:
    """A local sentence-embedding model (mean-pooled last hidden states), frozen."""

    def __init__(self, path: str, *, model: Any = None, tokenizer: Any = None) -> None:
        self.name = f"transformers:{path}"
        if model is None:
            from transformers import AutoModel, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = AutoModel.from_pretrained(path, local_files_only=True)
        self.model, self.tokenizer = model.eval(), tokenizer
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        batch = self.tokenizer(list(texts), padding=True, truncation=True, max_length=512,
                               return_tensors="pt")
        with torch.no_grad():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        return nn.functional.normalize(pooled, dim=1)


class RouterNet(nn.Module):
    """embedding -> one logit per expert. The latent Mixture-of-Thoughts trains it too,
    through the softmax weights it gives the active peers."""

    def __init__(self, dim: int, experts: int, hidden: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, experts))

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        return self.layers(embedding)


@dataclass(frozen=True)
class Outcome:
    """One logged attempt: the task's text, the expert, and what the gate said."""

    text: str
    expert: str
    compiled: bool
    passed: bool
    time_ms: float | None = None


def targets(outcomes: Iterable[Outcome]) -> list[tuple[str, str, float]]:
    """(text, expert, target in [0, 1]) per outcome: 0 when it did not compile, 0.25
    when it compiled but failed L0, and for a passing kernel 0.5 + 0.5 x (the fastest
    passing time on the same text / its time), so speed orders the experts that pass."""
    outcomes = list(outcomes)
    fastest: dict[str, float] = defaultdict(lambda: math.inf)
    for o in outcomes:
        if o.passed and o.time_ms and o.time_ms > 0:
            fastest[o.text] = min(fastest[o.text], o.time_ms)
    rows = []
    for o in outcomes:
        if not o.compiled:
            target = 0.0
        elif not o.passed:
            target = 0.25
        elif o.time_ms and o.time_ms > 0 and math.isfinite(fastest[o.text]):
            target = 0.5 + 0.5 * fastest[o.text] / o.time_ms
        else:
            target = 0.75  # passed, time unknown (L0 only)
        rows.append((o.text, o.expert, target))
    return rows


@dataclass
class Router:
    experts: list[str]  # the configured order: the default until trained
    encoder: Encoder = field(default_factory=HashingEncoder)
    hidden: int = 64
    seed: int = 0
    trained_on: int = 0  # outcomes the MLP learned from

    def __post_init__(self) -> None:
        if not self.experts:
            raise ValueError("a router needs at least one expert")
        torch.manual_seed(self.seed)
        self.net = RouterNet(self.encoder.dim, len(self.experts), self.hidden)

    @property
    def trained(self) -> bool:
        return self.trained_on >= MIN_OUTCOMES

    def logits(self, texts: Sequence[str]) -> torch.Tensor:
        return self.net(self.encoder.encode(texts))

    def route(self, text: str, k: int) -> Routing:
        k = max(1, min(k, len(self.experts)))
        if not self.trained:
            why = (f"the configured order (the router has learned from {self.trained_on} outcomes; "
                   f"it needs {MIN_OUTCOMES})")
            return ConfiguredOrder(self.experts, why).route(text, k)
        with torch.no_grad():
            probs = torch.sigmoid(self.logits([text]))[0].tolist()
        scores = dict(zip(self.experts, probs, strict=True))
        ranked = sorted(self.experts, key=lambda name: (-scores[name], self.experts.index(name)))
        return Routing(tuple(ranked[:k]), scores, f"the router (trained on {self.trained_on} outcomes)")

    def fit(self, outcomes: Sequence[Outcome], *, epochs: int = 200, lr: float = 1e-2) -> list[float]:
        """Train the MLP on logged outcomes (experts not configured are skipped); the
        loss per epoch. Binary cross-entropy of each (text, expert) logit against its
        target: only the experts that were tried on a text are judged on it."""
        rows = [(t, self.experts.index(e), y) for t, e, y in targets(outcomes) if e in self.experts]
        if not rows:
            return []
        texts = sorted({t for t, _, _ in rows})
        embedded = self.encoder.encode(texts)
        where = {t: i for i, t in enumerate(texts)}
        text_index = torch.tensor([where[t] for t, _, _ in rows])
        expert_index = torch.tensor([e for _, e, _ in rows])
        target = torch.tensor([y for _, _, y in rows])
        optimizer = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=1e-3)
        losses = []
        for _ in range(epochs):
            logits = self.net(embedded)[text_index, expert_index]
            loss = nn.functional.binary_cross_entropy_with_logits(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        self.trained_on = len(rows)
        return losses

    # --- a trained router on disk: one safetensors file, its metadata inside -----------

    def save(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        meta = {"experts": json.dumps(self.experts), "encoder": self.encoder.name,
                "hidden": str(self.hidden), "trained_on": str(self.trained_on)}
        save_file({k: v.contiguous() for k, v in self.net.state_dict().items()}, str(path), metadata=meta)

    @classmethod
    def load(cls, path: str | Path, experts: list[str], encoder: Encoder) -> Router:
        """The saved router for these experts and this encoder; a router saved for
        others (an expert added or removed, another encoder) is not used: ValueError."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
            weights = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
        saved = json.loads(meta.get("experts", "[]"))
        if saved != experts:
            raise ValueError(f"the router at {path} was trained for experts {saved}, not {experts}: "
                             "train it again (manage.py generation train-router)")
        if meta.get("encoder") != encoder.name:
            raise ValueError(f"the router at {path} was trained with encoder {meta.get('encoder')}, "
                             f"not {encoder.name}")
        router = cls(experts=experts, encoder=encoder, hidden=int(meta.get("hidden", 64)),
                     trained_on=int(meta.get("trained_on", 0)))
        router.net.load_state_dict(weights)
        return router

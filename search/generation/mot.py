"""Local experts collaborating in latent space: the Mixture-of-Thoughts.

After Fein-Ashley et al. (arXiv 2509.21164), as OptiML-G uses it. Each frozen expert's
decoder layers are split into Q stacks. For a prompt, the router scores the experts and
picks the active set; the best is the primary, the others its peers.

- Each peer reads the prompt (frozen, no gradient) and its hidden state after each
  stack is kept.
- After each of its own stacks, the primary's hidden states go through its adapter into
  the shared space, cross-attend over the peers' adapted states (the router's weights
  for the peers as an additive log-weight on their keys, which is how the router learns
  from the next-token loss), come back through the primary's output adapter, and are
  added as a residual gated by tanh(g) with g initialised at zero: an untrained fusion
  leaves the primary's output exactly as it was.
- The primary then continues with its next stack.

Peers read the prompt only, never the kernel being written, so nothing of a later
token reaches an earlier one (training and generation see the same thing; generation
keeps the primary's KV cache and reuses the peers' states for every new token).

Only the router, the adapters and the cross-attention are trained (`train`), with the
next-token loss on the kernel; the experts stay frozen. The layers are reached with
forward hooks on the experts' decoder layers, so any transformers causal LM whose
layers are one ModuleList works (Llama, Qwen2, Mistral, GPT-2, StarCoder2, ...), and
experts may differ in width, depth and tokenizer.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .router import Encoder, HashingEncoder, RouterNet


class ByteTokenizer:
    """Bytes as tokens (0-255) and three specials: for models built from configs at
    random, which have no tokenizer of their own. Real experts bring theirs."""

    bos_token_id, eos_token_id, pad_token_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The model's decoder layers: the ModuleList as long as the config's layer count."""
    count = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    for _, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"{type(model).__name__}: no ModuleList of its {count} decoder layers")


def hidden_size(model: nn.Module) -> int:
    config = model.config
    return int(getattr(config, "hidden_size", None) or config.n_embd)


def stack_ends(layers: int, stacks: int) -> list[int]:
    """The index of the last layer of each of `stacks` near-equal stacks."""
    stacks = max(1, min(stacks, layers))
    return sorted({round((q + 1) * layers / stacks) - 1 for q in range(stacks)})


class Fusion(nn.Module):
    """One stack's exchange, a gated cross-attention block in the shared space (as in
    Flamingo's gated xattn-dense layers): the primary's states through its adapter,
    cross-attention over the peers' adapted states, a feed-forward layer, and the change
    brought back to the primary's width through its output adapter, scaled by tanh(g)
    with g = 0 at first, per expert as primary."""

    def __init__(self, widths: dict[str, int], shared: int, heads: int) -> None:
        super().__init__()
        self.into = nn.ModuleDict({name: nn.Linear(width, shared) for name, width in widths.items()})
        self.norm = nn.LayerNorm(shared)
        self.attn = nn.MultiheadAttention(shared, heads, batch_first=True)
        self.ffn = nn.Sequential(nn.LayerNorm(shared), nn.Linear(shared, 4 * shared), nn.GELU(),
                                 nn.Linear(4 * shared, shared))
        self.back = nn.ModuleDict({name: nn.Linear(shared, width) for name, width in widths.items()})
        self.gate = nn.ParameterDict({name: nn.Parameter(torch.zeros(1)) for name in widths})
        self.heads = heads

    def adapt(self, name: str, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(self.into[name](hidden.float()))

    def forward(self, primary: str, hidden: torch.Tensor, peers: torch.Tensor,
                log_weights: torch.Tensor) -> torch.Tensor:
        """hidden (B, T, H_primary); peers (B, S, shared); log_weights (S,) added to the
        attention logits of each peer position."""
        query = self.adapt(primary, hidden)
        bias = log_weights.to(query.dtype).expand(query.shape[0] * self.heads, query.shape[1], -1)
        mixed, _ = self.attn(query, peers, peers, attn_mask=bias, need_weights=False)
        change = mixed + self.ffn(query + mixed)
        residual = torch.tanh(self.gate[primary]) * self.back[primary](change)
        return hidden + residual.to(hidden.dtype)


SCHEDULES = ("cosine", "constant")


def learning_rate_factor(progress: float, schedule: str, warmup: float) -> float:
    """The learning rate's share of its peak at `progress` (0 at the start, 1 at the end):
    a linear rise over the first `warmup`, then flat ("constant") or half a cosine down to
    a tenth ("cosine")."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return max(progress / warmup, 0.01)
    if schedule == "constant":
        return 1.0
    after = (progress - warmup) / (1.0 - warmup) if warmup < 1 else 1.0
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * after))


@dataclass
class Expert:
    name: str
    model: nn.Module
    tokenizer: Any

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


@dataclass
class TrainReport:
    steps: int
    losses: list[float]
    tokens: int
    seconds: float
    trainable_parameters: int
    frozen_parameters: int
    batch: int = 1  # pairs per step
    schedule: str = "constant"
    learning_rates: list[float] = field(default_factory=list)  # at each logged step

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "tokens": self.tokens, "seconds": round(self.seconds, 3),
                "tokens_per_s": round(self.tokens_per_s, 1),
                "first_loss": self.losses[0] if self.losses else None,
                "last_loss": self.losses[-1] if self.losses else None,
                "trainable_parameters": self.trainable_parameters,
                "frozen_parameters": self.frozen_parameters, "batch": self.batch, "schedule": self.schedule,
                "losses": [round(x, 4) for x in self.losses],
                "learning_rates": [float(f"{x:.4g}") for x in self.learning_rates]}


@dataclass
class _Call:
    """What the hooks need during one forward pass."""

    modes: dict[str, str] = field(default_factory=dict)  # expert -> "capture" or "fuse"
    captured: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    peers: list[torch.Tensor] = field(default_factory=list)  # per stack: (1, S, shared)
    log_weights: torch.Tensor | None = None  # (S,)
    primary: str = ""
    active: list[str] = field(default_factory=list)  # primary first


class MixtureOfThoughts(nn.Module):
    """Frozen experts, a router and one Fusion per stack. The experts are held outside
    the module's parameters, so `state_dict()` is exactly what is trained and saved."""

    def __init__(self, experts: Sequence[Expert], *, stacks: int = 2, shared: int = 64, heads: int = 4,
                 encoder: Encoder | None = None, router_hidden: int = 64, k: int = 2) -> None:
        super().__init__()
        if not experts:
            raise ValueError("a Mixture-of-Thoughts needs at least one expert")
        self.experts = {e.name: e for e in experts}
        self.names = [e.name for e in experts]
        self.encoder = encoder or HashingEncoder()
        self.k = max(1, min(k, len(experts)))
        self.stacks = stacks
        self.shared = shared
        self.router = RouterNet(self.encoder.dim, len(experts), router_hidden)
        self.fusions = nn.ModuleList(
            Fusion({e.name: hidden_size(e.model) for e in experts}, shared, heads) for _ in range(stacks))
        self._call: _Call | None = None
        self._hooks = []
        for expert in experts:
            expert.model.eval()
            for parameter in expert.model.parameters():
                parameter.requires_grad_(False)
            layers = decoder_layers(expert.model)
            ends = stack_ends(len(layers), stacks)
            if len(ends) != stacks:
                raise ValueError(f"expert {expert.name!r} has {len(layers)} layers: fewer than "
                                 f"the {stacks} stacks asked for")
            for q, index in enumerate(ends):
                self._hooks.append(layers[index].register_forward_hook(self._hook(expert.name, q)))

    # --- the hooks: capture a peer's states, or fuse into the primary's -------------------

    def _hook(self, name: str, q: int):
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            call = self._call
            mode = call.modes.get(name) if call else None
            if mode is None:
                return None
            hidden = output[0] if isinstance(output, tuple) else output
            if mode == "capture":
                call.captured.setdefault(name, []).append(hidden.detach())
                return None
            fused = self.fusions[q](name, hidden, call.peers[q], call.log_weights)
            return (fused, *output[1:]) if isinstance(output, tuple) else fused

        return hook

    def device(self) -> torch.device:
        return next(self.fusions.parameters()).device

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    # --- routing --------------------------------------------------------------------------

    def route(self, text: str, active: Sequence[str] | None = None) -> tuple[list[str], torch.Tensor]:
        """The active experts (primary first) and the router's logits for all experts."""
        embedding = self.encoder.encode([text]).to(self.device())
        logits = self.router(embedding)[0]
        if active is None:
            order = torch.argsort(logits.detach(), descending=True).tolist()
            active = [self.names[i] for i in order[: self.k]]
        unknown = [name for name in active if name not in self.experts]
        if unknown:
            raise ValueError(f"unknown experts: {', '.join(unknown)}")
        return list(active), logits

    def _prepare(self, text: str, active: Sequence[str] | None) -> _Call:
        """Run the peers on the prompt and keep their adapted states per stack."""
        names, logits = self.route(text, active)
        primary, peers = names[0], names[1:]
        call = _Call(primary=primary, active=names)
        if not peers:
            return call
        self._call = _Call(modes=dict.fromkeys(peers, "capture"))
        try:
            with torch.no_grad():
                for name in peers:
                    expert = self.experts[name]
                    ids = torch.tensor([expert.encode(text)], device=self.device())
                    expert.model(input_ids=ids)
            captured = self._call.captured
        finally:
            self._call = None
        weights = torch.log_softmax(torch.stack([logits[self.names.index(n)] for n in peers]), dim=0)
        lengths = [captured[name][0].shape[1] for name in peers]
        call.log_weights = torch.cat([w.expand(n) for w, n in zip(weights, lengths, strict=True)])
        for q, fusion in enumerate(self.fusions):
            call.peers.append(torch.cat([fusion.adapt(name, captured[name][q]) for name in peers], dim=1))
        call.modes = {primary: "fuse"}
        return call

    # --- training and generation ----------------------------------------------------------

    def loss(self, text: str, target: str, active: Sequence[str] | None = None) -> tuple[torch.Tensor, int]:
        """Next-token loss of the primary on `target` (the kernel) after `text` (the
        intent), and the number of target tokens."""
        call = self._prepare(text, active)
        expert = self.experts[call.primary]
        prompt = expert.encode(text)
        answer = [*expert.encode(target), expert.tokenizer.eos_token_id]
        ids = torch.tensor([prompt + answer], device=self.device())
        labels = torch.tensor([[-100] * len(prompt) + answer], device=self.device())
        self._call = call if call.peers else None
        try:
            out = expert.model(input_ids=ids, labels=labels)
        finally:
            self._call = None
        return out.loss, len(answer)

    def logits(self, text: str, continuation: str = "", active: Sequence[str] | None = None) -> torch.Tensor:
        """The primary's logits over text + continuation, with the fusion in place."""
        call = self._prepare(text, active)
        expert = self.experts[call.primary]
        ids = torch.tensor([expert.encode(text + continuation)], device=self.device())
        self._call = call if call.peers else None
        try:
            with torch.no_grad():
                return expert.model(input_ids=ids).logits
        finally:
            self._call = None

    def generate(self, text: str, *, max_new_tokens: int = 512, active: Sequence[str] | None = None,
                 seed: int = 0, sample: bool = False) -> tuple[str, list[str]]:
        """The primary's continuation of `text` with its peers' thoughts fused in, and
        the active experts (primary first)."""
        torch.manual_seed(seed)
        with torch.no_grad():
            call = self._prepare(text, active)
        expert = self.experts[call.primary]
        ids = torch.tensor([expert.encode(text)], device=self.device())
        self._call = call if call.peers else None
        try:
            with torch.no_grad():
                out = expert.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                    do_sample=sample, pad_token_id=expert.tokenizer.pad_token_id,
                    eos_token_id=expert.tokenizer.eos_token_id)
        finally:
            self._call = None
        return expert.tokenizer.decode(out[0, ids.shape[1]:].tolist(), skip_special_tokens=True), call.active

    def train_pairs(self, pairs: Sequence[tuple[str, str]], *, steps: int, lr: float = 3e-3,
                    seed: int = 0, log_every: int = 1, max_seconds: float | None = None, batch: int = 1,
                    schedule: str = "cosine", warmup: float = 0.05) -> TrainReport:
        """AdamW on the router and fusion parameters only: each step averages the gradients
        of `batch` (intent, kernel) pairs (accumulated one pair at a time: their lengths
        and routings differ), drawn in a seeded shuffled order; the loss (the step's mean)
        every `log_every` steps. Stops after `steps`, or earlier once `max_seconds` have
        passed. The learning rate rises linearly over the first `warmup` of the run, then
        follows `schedule`: "cosine" down to a tenth of `lr` at the end, or "constant". The
        run's progress is whichever limit is nearer: steps done, or seconds spent."""
        if not pairs:
            raise ValueError("no (intent, kernel) pairs to train on")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule {schedule!r}: one of {', '.join(SCHEDULES)}")
        rng = random.Random(seed)
        torch.manual_seed(seed)
        optimizer = torch.optim.AdamW(self.trainable(), lr=lr, weight_decay=0.0)
        order: list[int] = []
        losses, rates, tokens, started = [], [], 0, time.monotonic()
        self.train()
        done = 0
        for step in range(steps):
            elapsed = time.monotonic() - started
            if max_seconds is not None and elapsed > max_seconds:
                break
            done = step + 1
            progress = max(step / steps, elapsed / max_seconds if max_seconds else 0.0)
            rate = lr * learning_rate_factor(progress, schedule, warmup)
            for group in optimizer.param_groups:
                group["lr"] = rate
            optimizer.zero_grad()
            total = 0.0
            for _ in range(batch):
                if not order:
                    order = list(range(len(pairs)))
                    rng.shuffle(order)
                text, target = pairs[order.pop()]
                loss, count = self.loss(text, target)
                (loss / batch).backward()
                total += loss.item() / batch
                tokens += count
            nn.utils.clip_grad_norm_(self.trainable(), 1.0)
            optimizer.step()
            if step % log_every == 0 or step == steps - 1:
                losses.append(total)
                rates.append(rate)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.eval()
        frozen = sum(p.numel() for e in self.experts.values() for p in e.model.parameters())
        return TrainReport(steps=done, losses=losses, tokens=tokens, seconds=time.monotonic() - started,
                           trainable_parameters=sum(p.numel() for p in self.trainable()),
                           frozen_parameters=frozen, batch=batch, schedule=schedule, learning_rates=rates)

    def mean_loss(self, pairs: Sequence[tuple[str, str]]) -> float:
        with torch.no_grad():
            values = [float(self.loss(text, target)[0]) for text, target in pairs]
        return sum(values) / len(values) if values else math.nan

    # --- the trained parts on disk ----------------------------------------------------------

    def save(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        meta = {"experts": json.dumps(self.names), "stacks": str(self.stacks), "shared": str(self.shared),
                "encoder": self.encoder.name, "k": str(self.k)}
        save_file({k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, str(path),
                  metadata=meta)

    @classmethod
    def trained(cls, path: str | Path, experts: Sequence[Expert]) -> MixtureOfThoughts:
        """A mixture over `experts` with the fusion and router trained into `path` (its
        stacks, width and k are read from the file)."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
        encoder = meta.get("encoder", "")
        if not encoder.startswith("hashing-"):
            raise ValueError(f"{path}: trained with encoder {encoder!r}; only the hashing encoder "
                             "is rebuilt here")
        heads = 4
        mot = cls(experts, stacks=int(meta.get("stacks", 2)), shared=int(meta.get("shared", 64)), heads=heads,
                  encoder=HashingEncoder(int(encoder.split("-")[1])), k=int(meta.get("k", 2)))
        mot.load_trained(path)
        return mot

    def load_trained(self, path: str | Path) -> None:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
            weights = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
        if json.loads(meta.get("experts", "[]")) != self.names or int(meta.get("stacks", 0)) != self.stacks:
            raise ValueError(f"{path} was trained for experts {meta.get('experts')} with "
                             f"{meta.get('stacks')} stacks, not {self.names} with {self.stacks}")
        self.load_state_dict(weights)


def fit_experts(experts: Sequence[Expert], pairs: Sequence[tuple[str, str]], *, max_seconds: float,
                lr: float = 1e-3, seed: int = 0, max_steps: int | None = None) -> dict[str, dict[str, Any]]:
    """Fine-tune every parameter of each expert, on its own, on (intent, kernel) pairs:
    next-token loss on the kernel after the intent, AdamW, for `max_seconds` per expert.

    A stand-in for pre-training where no pre-trained weights are reachable: random tiny
    experts know no code at all, so a fusion over them has nothing to fuse. Fitted on
    the pairs it is then trained on, an expert can only memorise them; what this buys is
    a path from training through generation to the gate that a parseable kernel takes,
    not generation quality. Real experts arrive pre-trained and stay frozen throughout.
    `max_steps` stops an expert sooner, after that many steps (the same work however busy
    the host is). Returns each expert's steps, first and last loss."""
    if not pairs:
        raise ValueError("no (intent, kernel) pairs to fit the experts on")
    report: dict[str, dict[str, Any]] = {}
    for expert in experts:
        rng = random.Random(seed)
        torch.manual_seed(seed)
        model = expert.model
        device = next(model.parameters()).device
        for parameter in model.parameters():
            parameter.requires_grad_(True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        model.train()
        order: list[int] = []
        losses: list[float] = []
        started = time.monotonic()
        while time.monotonic() - started < max_seconds and (max_steps is None or len(losses) < max_steps):
            if not order:
                order = list(range(len(pairs)))
                rng.shuffle(order)
            text, target = pairs[order.pop()]
            prompt = expert.encode(text)
            answer = [*expert.encode(target), expert.tokenizer.eos_token_id]
            ids = torch.tensor([prompt + answer], device=device)
            labels = torch.tensor([[-100] * len(prompt) + answer], device=device)
            optimizer.zero_grad()
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        report[expert.name] = {"steps": len(losses), "first_loss": losses[0] if losses else None,
                               "last_loss": losses[-1] if losses else None,
                               "seconds": round(time.monotonic() - started, 2)}
    return report


def tiny_experts(specs: Sequence[dict[str, Any]] | None = None, *, seed: int = 0) -> list[Expert]:
    """Small causal LMs built from configs at random (no weights anywhere): a Llama, a
    GPT-2 and a Qwen2 of different widths and depths, sharing the byte tokenizer. For
    the tests and for measuring training speed on a GPU host without weights."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    tokenizer = ByteTokenizer()
    # A wide initialisation: with the usual 0.02 a random model's frozen output layer
    # cannot express a peaked distribution at all (its logits stay within about +-1), so
    # no trained fusion could lower the loss much; real experts do not have that problem.
    common = {"vocab_size": tokenizer.vocab_size, "bos_token_id": tokenizer.bos_token_id,
              "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    specs = specs or [
        {"name": "llama-tiny", "arch": "llama", "width": 64, "layers": 4},
        {"name": "gpt2-tiny", "arch": "gpt2", "width": 48, "layers": 4},
        {"name": "qwen2-tiny", "arch": "qwen2", "width": 32, "layers": 2},
    ]
    experts = []
    for index, spec in enumerate(specs):
        torch.manual_seed(seed + index)
        width, layers, positions = spec["width"], spec["layers"], spec.get("positions", 4096)
        common["initializer_range"] = 3.2 / width**0.5  # 0.4 at width 64: logits of a few units
        if spec["arch"] == "gpt2":
            model = GPT2LMHeadModel(GPT2Config(n_embd=width, n_layer=layers, n_head=4, n_positions=positions,
                                               **common))
        else:
            config_class, model_class = ((LlamaConfig, LlamaForCausalLM) if spec["arch"] == "llama"
                                         else (Qwen2Config, Qwen2ForCausalLM))
            model = model_class(config_class(hidden_size=width, intermediate_size=2 * width,
                                             num_hidden_layers=layers, num_attention_heads=4,
                                             num_key_value_heads=2, max_position_embeddings=positions,
                                             **common))
        experts.append(Expert(spec["name"], model, tokenizer))
    return experts

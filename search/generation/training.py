"""train-mot: the fusion and router trained on (intent, kernel) pairs, on a GPU host.

    python -m search.generation train-mot --pairs pairs.json --out mot.safetensors \\
        (--tiny | --expert NAME=PATH ...) [--minutes 5] [--steps N] [--stacks 2] \\
        [--batch 8] [--schedule cosine] [--warmup 0.05]

No Django here (GPU hosts have none): `manage.py generation dataset` writes the pairs
from the database, `manage.py generation train-mot` calls `train` in-process where the
web app's host has a GPU. The experts stay frozen; the report has the loss curve and
tokens per second.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .dataset import Pair, load


def train(pairs: Sequence[Pair], experts: list[Any], *, out: str, minutes: float = 5.0, steps: int = 10**9,
          lr: float = 3e-3, stacks: int = 2, shared: int = 256, k: int = 2, batch: int = 1,
          schedule: str = "cosine", warmup: float = 0.05) -> dict[str, Any]:
    import torch

    from .mot import MixtureOfThoughts

    device = "cuda" if torch.cuda.is_available() else "cpu"
    for expert in experts:
        expert.model.to(device)
    mot = MixtureOfThoughts(experts, stacks=stacks, shared=shared, k=k).to(device)
    limit = min(getattr(e.model.config, "max_position_embeddings", None) or e.model.config.n_positions
                for e in experts)
    usable = [(p.prompt, p.target) for p in pairs
              if max(len(e.encode(p.prompt + p.target)) for e in experts) + 1 <= limit]
    if not usable:
        raise ValueError(f"no pair fits the experts' context of {limit} tokens")
    before = mot.mean_loss(usable)
    report = mot.train_pairs(usable, steps=steps, lr=lr, log_every=25, max_seconds=minutes * 60, batch=batch,
                             schedule=schedule, warmup=warmup)
    after = mot.mean_loss(usable)
    mot.save(out)
    return {"device": device, "pairs": len(usable), "dropped_too_long": len(pairs) - len(usable),
            "mean_loss_before": before, "mean_loss_after": after, "saved": out, **report.to_dict()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m search.generation")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train-mot", help="train the fusion and router on (intent, kernel) pairs")
    p.add_argument("--pairs", required=True, help="a pairs file (manage.py generation dataset)")
    p.add_argument("--out", required=True, help="where the trained parts go (.safetensors)")
    p.add_argument("--tiny", action="store_true", help="small random experts built from configs")
    p.add_argument("--expert", action="append", default=[], metavar="NAME=PATH",
                   help="a local expert (a directory, or a hub id in the local cache)")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--stacks", type=int, default=2)
    p.add_argument("--shared", type=int, default=256)
    p.add_argument("--batch", type=int, default=1, help="pairs per step (gradients averaged)")
    p.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                   help="the learning rate after the warmup: half a cosine down to a tenth, or flat")
    p.add_argument("--warmup", type=float, default=0.05, help="share of the run the learning rate rises over")
    p.add_argument("--report", help="write the report (JSON) here too")
    args = parser.parse_args(argv)
    try:
        pairs = load(args.pairs)
        experts = build(args.tiny, args.expert)
        report = train(pairs, experts, out=args.out, minutes=args.minutes, steps=args.steps, lr=args.lr,
                       stacks=args.stacks, shared=args.shared, batch=args.batch, schedule=args.schedule,
                       warmup=args.warmup)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=1)
    if args.report:
        with open(args.report, "w") as handle:
            handle.write(text)
    print(json.dumps({k: v for k, v in report.items() if k not in ("losses", "learning_rates")}))
    return 0


def build(tiny: bool, named: list[str]) -> list[Any]:
    from .experts import ExpertConfigError, load_local
    from .mot import Expert, tiny_experts

    if tiny == bool(named):
        raise ValueError("give --tiny or at least one --expert NAME=PATH, not both")
    if tiny:
        return tiny_experts()
    experts = []
    for item in named:
        name, _, path = item.partition("=")
        if not name or not path:
            raise ValueError(f"--expert {item!r}: expected NAME=PATH")
        try:
            experts.append(Expert(name, *load_local(path)))
        except ExpertConfigError as error:
            raise ValueError(str(error)) from None
    return experts

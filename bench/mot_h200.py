"""OptiML-G's latent Mixture-of-Thoughts trained on a GPU host, and what it then writes,
through the gate (issue 13).

    python bench/mot_h200.py --out $OUT/mot.json --minutes 4

No pre-trained weights are reachable here, so the experts are small causal LMs built
from configs at random (a Llama, a GPT-2 and a Qwen2 of different widths, sharing a byte
tokenizer), frozen; only the router, the adapters and the cross-attention are trained,
on (intent, kernel) pairs from the product's own verified kernels: the suite's naive
kernels and the lineage experts' all-off states (every state passed the gate when its
lineage was recorded). Reported: tokens per second, the loss curve, and for each suite
intent the kernel the trained mixture writes (greedy), put through the real gate at L0.
Random frozen experts can at best reproduce what the fusion memorised: this measures
the machinery (speed, learning, the path from generation to the gate), not generation
quality, which needs real code models.

With `--fit-experts MINUTES`, each expert is first fine-tuned whole on the same pairs
(`mot.fit_experts`, split evenly over the experts), a stand-in for pre-training: random
experts know no code, and a fusion over them alone wrote no parseable kernel on the
H200 (2026-12-02). Fitted experts memorise the pairs, so a kernel they then write is a
recalled training kernel: it tests the path to the gate, never generalisation.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from lineage.engine import experts as lineage_experts  # noqa: E402
from search.generation.dataset import suite_pairs  # noqa: E402
from search.generation.loop import GateChecker  # noqa: E402
from search.generation.mot import MixtureOfThoughts, fit_experts, tiny_experts  # noqa: E402
from search.generation.writing import read_fenced  # noqa: E402

POSITIONS = 4096


def gpu_facts() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {"gpu": None, "driver": None}
    name, _, driver = out.stdout.strip().splitlines()[0].partition(", ")
    return {"gpu": name, "driver": driver}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--stacks", type=int, default=2)
    parser.add_argument("--shared", type=int, default=256)
    parser.add_argument("--only", help="train on the pairs of this task (relu) or origin (naive:relu) only: "
                        "a memorisation check")
    parser.add_argument("--fit-experts", type=float, default=0.0, metavar="MINUTES",
                        help="fine-tune the experts whole on the pairs first (a stand-in for pre-training)")
    parser.add_argument("--generate", default="relu,reduce_sum,softmax,sgemm",
                        help="suite intents to write after training (comma-separated)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    specs = [{"name": "llama-256", "arch": "llama", "width": 256, "layers": 4, "positions": POSITIONS},
             {"name": "gpt2-192", "arch": "gpt2", "width": 192, "layers": 4, "positions": POSITIONS},
             {"name": "qwen2-128", "arch": "qwen2", "width": 128, "layers": 4, "positions": POSITIONS}]
    experts = tiny_experts(specs)
    for expert in experts:
        expert.model.to(device)
    pairs = [p for p in [*suite_pairs(), *lineage_experts.generation_pairs(full=False)]
             if len((p.prompt + p.target).encode()) + 1 <= POSITIONS
             and args.only in (None, p.task, p.origin)]
    texts = [(p.prompt, p.target) for p in pairs]
    fitted = (fit_experts(experts, texts, max_seconds=args.fit_experts * 60 / len(experts))
              if args.fit_experts > 0 else None)
    mot = MixtureOfThoughts(experts, stacks=args.stacks, shared=args.shared, heads=4, k=2).to(device)
    before = mot.mean_loss(texts)
    report = mot.train_pairs(texts, steps=10**9, lr=args.lr, log_every=25, max_seconds=args.minutes * 60)
    after = mot.mean_loss(texts)

    checker = GateChecker()
    written = []
    by_task = {p.task: p for p in pairs if p.origin.startswith("naive:")}
    for name in [n for n in args.generate.split(",") if n]:
        target = by_task[name]
        started = time.monotonic()
        text, active = mot.generate(target.prompt, max_new_tokens=len(target.target.encode()) + 32)
        seconds = time.monotonic() - started
        row = {"task": name, "experts": active, "generate_seconds": round(seconds, 2),
               "characters": len(text), "reproduces_training_kernel": text.strip() == target.target.strip()}
        try:
            kernel = read_fenced("mot:" + "+".join(active), text)
        except ValueError as error:
            row.update(stage="reply", message=str(error), head=text[:200])
        else:
            from profiling.harness import tasks

            check = checker.check(tasks.get(name), kernel.candidate)
            row.update(stage=check.stage, passed=check.passed, guard=check.guard, message=check.message[:400])
        written.append(row)
        print(json.dumps(row), flush=True)

    result = {
        "command": "python " + " ".join(sys.argv), "date": datetime.datetime.now(datetime.UTC).isoformat(),
        **gpu_facts(), "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "device": device,
        "experts": specs, "experts_fitted": fitted,
        "stacks": args.stacks, "shared": args.shared, "lr": args.lr,
        "pairs": len(pairs), "only": args.only, "origins": sorted({p.origin.split(":")[0] for p in pairs}),
        "mean_loss_before": before, "mean_loss_after": after, "training": report.to_dict(),
        "tokens_per_s_note": "target tokens trained per second (the loss tokens), one pair per step",
        "written": written,
        "note": "no pre-trained weights were reachable: the experts are random tiny models, so this "
                "measures training speed, learning and the path to the gate, not generation quality"
                + ("; the experts were fitted whole on the training pairs first (--fit-experts), so a "
                   "kernel they write is a recalled training kernel, not a generalisation" if fitted else ""),
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("mean_loss_before", "mean_loss_after", "pairs")}),
          json.dumps({k: v for k, v in report.to_dict().items() if k != "losses"}))


if __name__ == "__main__":
    main()

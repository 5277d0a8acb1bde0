"""`manage.py generation`: OptiML-G's experts, router and fusion.

    python manage.py generation experts                  # what is configured, and who writes
    python manage.py generation evaluate [--experts a,b] [--k 5] [--samples 5] [--rounds 3]
                                         [--tasks relu,softmax] [--json report.json]
    python manage.py generation train-router [--epochs 300]
    python manage.py generation dataset --out pairs.json
    python manage.py generation train-mot --pairs pairs.json [--minutes 5]   # on a GPU host

`evaluate` writes from each suite task's intent (its description and contract, never
its reference or naive kernel) `--samples` times, checks each kernel with the gate (L0
on a GPU host; up to nvcc elsewhere, and it says so), and reports pass@1, pass@k and
the time to a first passing kernel. Every attempt is stored: the router learns from
them (`train-router`). Thin: the work is in search.generation and
search.generation_services.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from profiling.harness import tasks as task_registry
from profiling.harness.gate import gpu_name
from profiling.harness.jsonfile import write_json_atomically
from search import generation_services
from search.generation.experts import ExpertConfigError
from search.services import RunError


class Command(BaseCommand):
    help = ("OptiML-G: list the experts, evaluate them (pass@k), train the router, build pairs, "
            "train the fusion.")

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("experts", help="the configured experts and who writes")
        e = sub.add_parser("evaluate", help="pass@1, pass@k and time to pass over the suite's intents")
        e.add_argument("--experts", help="comma-separated names (default: all configured)")
        e.add_argument("--k", type=int, default=5)
        e.add_argument("--samples", type=int, default=5)
        e.add_argument("--rounds", type=int, default=None, help="repairs (default: OPTIML_GENERATION_ROUNDS)")
        e.add_argument("--tasks", help="comma-separated task names (default: the whole suite)")
        e.add_argument("--json", dest="json_out")
        r = sub.add_parser("train-router", help="train the router on the stored outcomes")
        r.add_argument("--epochs", type=int, default=300)
        d = sub.add_parser("dataset", help="(intent, kernel) pairs from the product's verified kernels")
        d.add_argument("--out", required=True)
        t = sub.add_parser("train-mot", help="train the fusion of the configured local experts (GPU host)")
        t.add_argument("--pairs", required=True)
        t.add_argument("--minutes", type=float, default=5.0)
        t.add_argument("--stacks", type=int, default=2)
        t.add_argument("--batch", type=int, default=1, help="pairs per step (gradients averaged)")
        t.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
        t.add_argument("--warmup", type=float, default=0.05)

    def handle(self, *args, **opts) -> None:
        try:
            getattr(self, "_" + opts["action"].replace("-", "_"))(opts)
        except (RunError, ExpertConfigError, ValueError) as error:
            raise CommandError(str(error)) from None

    def _experts(self, opts) -> None:
        specs = generation_services.experts_configured()
        if not specs:
            judge = generation_services._judge_expert()
            self.stdout.write(f"no experts configured; {judge.name} (the LLM judge's model) writes alone"
                              if judge else generation_services.NO_WRITER)
            return
        for spec in specs:
            self.stdout.write(json.dumps(spec.public()))
        self.stdout.write(f"active per task: {settings.OPTIML_GENERATION_K}; "
                          f"router: {generation_services._router([s.name for s in specs]).route('', 1).by}")

    def _evaluate(self, opts) -> None:
        from search.generation.loop import GateChecker
        from search.generation.passk import evaluate

        specs = generation_services.experts_configured()
        if opts["experts"]:
            wanted = [n.strip() for n in opts["experts"].split(",") if n.strip()]
            unknown = set(wanted) - {s.name for s in specs}
            if unknown:
                raise CommandError(f"not configured: {', '.join(sorted(unknown))}")
            specs = [s for s in specs if s.name in wanted]
        if not specs:
            judge = generation_services._judge_expert()
            specs = [judge] if judge else []
        if not specs:
            raise CommandError(generation_services.NO_WRITER)
        names = opts["tasks"].split(",") if opts["tasks"] else [t.name for t in task_registry.all_tasks()
                                                                 if t.naive_source]
        try:
            chosen = [task_registry.get(n.strip()) for n in names]
        except task_registry.UnknownTask as error:
            raise CommandError(str(error)) from None
        on_gpu = gpu_name() is not None
        if not on_gpu:
            self.stdout.write("no GPU here: kernels are checked up to nvcc; pass means compiled")
        checker = GateChecker(run_l0=on_gpu)
        if not on_gpu:
            checker = _CompiledCounts(checker)
        rounds = settings.OPTIML_GENERATION_ROUNDS if opts["rounds"] is None else opts["rounds"]

        def made(index: int):
            return generation_services.writer_for(specs)

        def stored(generation) -> None:
            generation_services.attempts_record(generation)
            self.stdout.write(f"  {generation.task}: {'passed' if generation.passed else 'failed'} after "
                              f"{len(generation.attempts)} attempt(s) by {generation.attempts[-1].writer}")

        report = evaluate(chosen, made, checker, samples=opts["samples"], k=opts["k"], rounds=rounds,
                          on_generation=stored)
        report.update(experts=[s.public() for s in specs],
                      checked="L0 on the GPU" if on_gpu else "up to nvcc")
        k = opts["k"]
        self.stdout.write(f"pass@1 {report['pass@1']:.3f}, pass@{k} {report[f'pass@{k}']:.3f}, "
                          f"pass@1 after repair {report['pass@1 after repair']:.3f}")
        if opts["json_out"]:
            write_json_atomically(opts["json_out"], report, indent=1)

    def _train_router(self, opts) -> None:
        report = generation_services.router_train(epochs=opts["epochs"])
        self.stdout.write(f"router trained on {report['outcomes']} outcomes "
                          f"(loss {report['first_loss']:.3f} -> "
                          f"{report['last_loss']:.3f}), saved to {report['path']}")

    def _dataset(self, opts) -> None:
        from search.generation.dataset import save

        pairs = generation_services.dataset_pairs()
        count = save(pairs, opts["out"])
        origins = sorted({p.origin.split(":")[0] for p in pairs})
        self.stdout.write(f"{count} pairs ({', '.join(origins)}) written to {opts['out']}")

    def _train_mot(self, opts) -> None:
        from search.generation.dataset import load
        from search.generation.experts import load_local
        from search.generation.mot import Expert
        from search.generation.training import train

        specs = generation_services.experts_configured()
        local = [s for s in specs if s.kind == "local"]
        if not local:
            raise CommandError("no local experts are configured: the latent fusion needs transformers models "
                               "(kind 'local'); for a try on random tiny models: python -m search.generation "
                               "train-mot --tiny")
        experts = [Expert(s.name, *load_local(s.path)) for s in local]
        path = settings.OPTIML_GENERATION_MOT
        path.parent.mkdir(parents=True, exist_ok=True)
        report = train(load(opts["pairs"]), experts, out=str(path), minutes=opts["minutes"],
                       stacks=opts["stacks"], k=settings.OPTIML_GENERATION_K, batch=opts["batch"],
                       schedule=opts["schedule"], warmup=opts["warmup"])
        curves = ("losses", "learning_rates")
        self.stdout.write(json.dumps({k: v for k, v in report.items() if k not in curves}))


class _CompiledCounts:
    """Off a GPU host: "compiled" counts as passing, and the report says it was so."""

    def __init__(self, checker) -> None:
        self.checker = checker

    def check(self, task, candidate):
        from search.generation.loop import Check

        found = self.checker.check(task, candidate)
        return Check(True, "compiled", found.message) if found.stage == "compiled" else found


"""Record the demo searches on a GPU host: one search per suite task, from its naive kernel.

    python bench/record_demo.py --out-dir $OUT/demo                      # every suite task
    python bench/record_demo.py --tasks relu,softmax --budget 30 --out-dir $OUT/demo
    python bench/record_demo.py --check search/demo_recordings         # anywhere, no GPU

For each task this runs the engine's own command line, as a person would on a GPU host:

    python -m search.engine optimize --task T --budget N --seed 0 --judge rules --no-screen \\
        --sources <DEMO_SOURCES> --record rec.json --json run.json

Every candidate gets the full gate (--no-screen), profile included, so the demo's
inspector has a verdict to show for each node, and a demo run (which does not screen)
asks the recording only for full verdicts. On the H200 a full gate takes about 18-30 s
(docs/benchmarks.md), so a budget of 30 is 10-15 minutes a task.

and writes <out-dir>/<gpu>/<task>.json (e.g. h200/relu.json): the recording, with the
"demo" object the app replays it by (search/demo.py): when, the seed, the judge, the
sources by dotted path and the evaluations the search made (the demo run's budget). Copy
the folder over search/demo_recordings/ and run tests/web/test_demo_replay.py: it replays
each file through the app's demo path and fails on any node left "not measured".

The sources are the engine's defaults (search.engine.__main__.DEFAULT_SOURCES: tunables,
rewrites and the skill cards recorded in this tree), which a demo run in the app builds
by the same dotted paths; not the app's StoredSkillSource, whose cards depend on a
database's library. No LLM: the skill source's LLM and the judge's are left out here and
in the app's demo runs (search.demo_runs.demo_sources), so the proposals are the same.
No Django: a GPU host has none.

--check DIR replays every recording under DIR with the engine's command line and the
search settings the recording names (--replay: no GPU), and exits 1 if any evaluated node
has no recorded verdict: the same check as tests/web/test_demo_replay.py, without Django.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiling.harness import tasks  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from search.demo import demo_metadata, demo_recordings, gpu_folder  # noqa: E402
from search.engine.__main__ import DEFAULT_SOURCES  # noqa: E402

# Settings that change what a search proposes: a demo is recorded without them, as the
# app replays it (an LLM's answers are not repeatable; the skill knobs change the cards).
PROPOSAL_KNOBS = ("OPTIML_LLM_BASE_URL", "OPTIML_LLM_API_KEY", "OPTIML_LLM_MODEL", "OPTIML_SKILL_CARDS",
                  "OPTIML_SKILL_SKELETONS", "OPTIML_SKILLS_LEAVE_OUT_OWN")
# The demo's search budget: enough for a tree a newcomer can explore (the H200 suite
# searches ran 30: bench/results/2026-11-29-h200-search.json) in minutes of GPU time a task.
DEFAULT_BUDGET = 30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: every suite task)")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="evaluations per task")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed (the demo replays it)")
    parser.add_argument("--out-dir", type=Path, help="writes <out-dir>/<gpu>/<task>.json")
    parser.add_argument("--check", type=Path, metavar="DIR",
                        help="replay the recordings under DIR instead (no GPU) and say which nodes miss")
    parser.add_argument("--workdir", type=Path, help="keep the searches' logs and reports here")
    args = parser.parse_args(argv)
    if args.check is not None:
        return check_recordings(args.check)
    if args.out_dir is None:
        parser.error("--out-dir is required to record (or --check DIR to replay)")
    names = [n.strip() for n in args.tasks.split(",") if n.strip()] or \
        [t.name for t in tasks.all_tasks() if t.naive_source]
    failed = [name for name in names if not record_task(name, args)]
    if failed:
        print(f"not every evaluated node was recorded for: {', '.join(failed)} (see above); a demo of "
              "these would show those nodes as 'not measured'", file=sys.stderr)
    return 1 if failed else 0


def record_task(task: str, args: argparse.Namespace) -> bool:
    """Search `task` from its naive kernel on this GPU and write its demo recording; whether
    every evaluated node has a recorded verdict."""
    work = Path(args.workdir or tempfile.mkdtemp(prefix="optiml-demo-")) / task
    work.mkdir(parents=True, exist_ok=True)
    recording, trajectory = work / "rec.json", work / "run.json"
    recording.unlink(missing_ok=True)  # RecordingEvaluator adds to an existing file
    search_args = ["--task", task, "--budget", str(args.budget), "--seed", str(args.seed), "--judge", "rules",
                   "--no-screen", "--sources", ",".join(DEFAULT_SOURCES)]
    command = [sys.executable, "-m", "search.engine", "optimize", *search_args,
               "--record", str(recording), "--json", str(trajectory), "--workdir", str(work / "gate")]
    print("$", " ".join(command), flush=True)
    env = {k: v for k, v in os.environ.items() if k not in PROPOSAL_KNOBS}
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    data = json.loads(recording.read_text())
    run = json.loads(trajectory.read_text())
    evaluated = [n for n in run["search"]["tree"]["nodes"] if n.get("evaluation")]
    missing = [n for n in evaluated if n["candidate_hash"] not in data["recorded"]]
    for node in missing:
        print(f"{task}: node {node['id']} ({node['proposal']['source']}) has no recorded verdict: "
              f"{(node.get('measurement') or {}).get('message', '')[:200]}", file=sys.stderr)
    today = datetime.date.today().isoformat()
    data["note"] = (f"recorded on the {data['gpu']} on {today} by bench/record_demo.py: python -m "
                    f"search.engine optimize {' '.join(search_args)}; {len(evaluated)} evaluations")
    data["demo"] = demo_metadata(recorded_at=today, seed=args.seed, budget=len(evaluated), judge="rules",
                                 sources=list(DEFAULT_SOURCES))
    out = args.out_dir / gpu_folder(data["gpu"]) / f"{task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(out, data, indent=1)
    print(f"{task}: {len(evaluated)} evaluations, {len(data['recorded'])} recorded -> {out}", flush=True)
    return not missing


def check_recordings(folder: Path) -> int:
    """Replay each demo recording under `folder` as the app would; 1 if any node misses."""
    missing_any = False
    for demo in demo_recordings(folder):
        with tempfile.TemporaryDirectory(prefix="optiml-demo-check-") as work:
            trajectory = Path(work) / "run.json"
            command = [sys.executable, "-m", "search.engine", "optimize", "--task", demo.task,
                       "--budget", str(demo.budget), "--seed", str(demo.seed), "--judge", demo.judge,
                       "--sources", ",".join(demo.sources), "--replay", str(demo.path),
                       "--json", str(trajectory)]
            env = {k: v for k, v in os.environ.items() if k not in PROPOSAL_KNOBS}
            subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
            nodes = json.loads(trajectory.read_text())["search"]["tree"]["nodes"]
        missing = [n for n in nodes
                   if n.get("evaluation") and (n.get("measurement") or {}).get("status") == "error"]
        missing_any = missing_any or bool(missing)
        print(f"{demo.key}: {len(nodes)} nodes, {len(missing)} not measured")
        for node in missing:
            print(f"  node {node['id']} ({node['proposal']['source']}: {node['proposal']['title']})")
    return 1 if missing_any else 0


if __name__ == "__main__":
    sys.exit(main())

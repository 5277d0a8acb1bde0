"""The skill cards' roundtrip gate, from the roundtrip searches the H200 ran
(bench/skills_roundtrip.py): each search replayed over its recording, every node a card
made under a passing parent taken as a trial, and each card's status decided by the rule
in lineage/engine/admission.py (verified, failed, or induced when it was never tried).
No GPU: the measurements are the recorded ones.

    python bench/cards_admission.py --roundtrip bench/results/2026-12-01-h200-roundtrip.json \\
        --out bench/results/2026-12-01-h200-admission.json
    python manage.py lineage admit bench/results/2026-12-01-h200-admission.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.skills_roundtrip import newest_lineage  # noqa: E402
from lineage.engine import admission, experts  # noqa: E402
from lineage.engine.lineage_replay import LineageReplay  # noqa: E402
from lineage.engine.skills import recorded_cards  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

# The rule as admission.py's docstring writes it down.
RULE = admission.__doc__.split("written down:")[1].split("Pure:")[0].strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roundtrip", required=True, help="the roundtrip's summary JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    run = json.loads(Path(args.roundtrip).read_text())
    recordings = Path(args.roundtrip).with_suffix("")
    trials = []
    for name, recorded in sorted(run["tasks"].items()):
        search = admission.replay_roundtrip(name, recorded["evaluations"], recordings / f"rec-{name}.json")
        trials += admission.trials(search, LineageReplay(experts.load(name), newest_lineage(name)))
    cards = [c["id"] for c in recorded_cards()]
    decided = admission.admit(cards, trials)
    counts: dict[str, int] = {}
    for result in decided.values():
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    write_json_atomically(args.out, {
        "what": "the skill cards' roundtrip gate: every node a card made in the H200 roundtrip "
                "searches, replayed from their recordings, judged by lineage/engine/admission.py",
        "rule": RULE,
        "command": shlex.join(["python", *sys.argv]), "source": args.roundtrip,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": run.get("environment", {}), "counts": counts, "cards": decided, "trials": trials,
    }, indent=1)
    print(f"{len(cards)} cards: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

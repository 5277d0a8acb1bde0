"""Benchmarks: each writes its results as JSON with the command, the GPU and the date."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path


def write_gpu_report(out: str, what: str, **fields) -> None:
    """Write a GPU benchmark's report to `out`: what it measured, the command that ran it,
    the date, the GPU and its driver (nvidia-smi), then `fields`."""
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout.strip()
    report = {"what": what, "command": " ".join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "gpu": smi, **fields}
    Path(out).write_text(json.dumps(report, indent=1) + "\n")

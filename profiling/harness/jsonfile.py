"""Writing a JSON file so that a reader never sees half of it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomically(path: str | Path, data: Any, *, indent: int = 2) -> None:
    """Written beside the target and renamed over it; on any failure the old file stays."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                                     prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(data, file, indent=indent, default=str)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise

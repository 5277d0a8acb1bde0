"""Induced cards kept on disk, keyed by a hash of everything their induction read.

Inducing the recorded cards takes about a minute; a process's first skills proposal should
not wait for it. So they are written once, gzipped, under a key over the recordings, the
code that induces them and whatever else the caller names (`salt`): changing any input
changes the key, so a stale file is never served. A missing, corrupt or unwritable cache is
never the caller's error, only a fresh induction. OPTIML_CARD_CACHE=0 turns it off.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import logging
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT = "optiml-card-cache/1"  # bump when the file's layout or the key's recipe changes
# What a damaged file raises while read: an I/O error, a gzip stream cut short (EOFError)
# or garbled (zlib.error, BadGzipFile is an OSError), bytes that are no JSON (ValueError).
_UNREADABLE = (OSError, EOFError, ValueError, zlib.error)

log = logging.getLogger(__name__)


def default_directory() -> Path:
    """OPTIML_CACHE_DIR, else $XDG_CACHE_HOME/optiml-studio, else ~/.cache/optiml-studio."""
    root = os.environ.get("OPTIML_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "optiml-studio")
    return Path(root) / "cards"


def cache_key(key_inputs: list[Path], code: list[Path], salt: str = "") -> str:
    """sha256 over the format, the salt, and each file's path and bytes, the recordings
    apart from the code. Paths are relative to the files' common folder, so every
    checkout of the same tree has the same key; each part is length-prefixed, so no two
    different sets of files can read as the same stream."""
    everything = [Path(p).resolve() for p in [*key_inputs, *code]]
    base = Path(os.path.commonpath([p.parent for p in everything])) if everything else Path()
    digest = hashlib.sha256()

    def part(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)

    part(FORMAT.encode())
    part(salt.encode())
    for section, paths in (("inputs", key_inputs), ("code", code)):
        part(section.encode())
        for path in sorted(Path(p).resolve() for p in paths):
            part(path.relative_to(base).as_posix().encode())
            part(path.read_bytes())
    return digest.hexdigest()


def cached(key_inputs: list[Path], code: list[Path], induce: Callable[[], list[dict[str, Any]]],
           directory: Path | None = None, *, salt: str = "") -> list[dict[str, Any]]:
    """The cards `induce` gives for these inputs: read from the cache when it holds them,
    else induced and written there for the next process."""
    if os.environ.get("OPTIML_CARD_CACHE", "1") == "0":
        return induce()
    key = cache_key(key_inputs, code, salt)
    path = (directory or default_directory()) / f"{key}.json.gz"
    found = _read(path, key)
    if found is not None:
        return found
    cards = induce()
    _write(path, {"format": FORMAT, "key": key, "cards": cards})
    return cards


def _read(path: Path, key: str) -> list[dict[str, Any]] | None:
    try:
        data = _parse(gzip.decompress(path.read_bytes()))
    except FileNotFoundError:
        return None
    except _UNREADABLE as error:
        log.warning("card cache %s is unreadable (%s); inducing again", path, error)
        return None
    if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("key") == key
            and isinstance(data.get("cards"), list)):
        log.warning("card cache %s is not this key's cards file; inducing again", path)
        return None
    return data["cards"]


def _parse(text: bytes) -> Any:
    """json.loads with the collector paused: the parse makes millions of small objects and
    no garbage, and the collector's passes over them were more than half its time (13 MB
    of cards: 0.6 s with them, 0.25 s without)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if was_enabled:
            gc.enable()


def _write(path: Path, data: dict[str, Any]) -> None:
    """Written beside its place, synced and renamed over it, so a reader (another process)
    sees the old file or the whole new one. A cache that cannot be written (a read-only
    home, no permission) only costs the next process an induction."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as raw:
            # mtime=0: the same cards give the same bytes. Level 6 on the recorded cards:
            # 0.64 MB in 0.15 s, where level 9 takes 0.31 s for 0.59 MB.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as file:
                file.write(json.dumps(data, separators=(",", ":")).encode())
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except OSError as error:
        log.warning("card cache %s cannot be written (%s); the cards are not kept", path, error)
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)

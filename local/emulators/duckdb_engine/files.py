"""The JSON state files of the local engine: complete when they appear, shared by :mod:`.engine` and :mod:`.quota`.

- :func:`write_json_atomic`: a temporary file in the same directory, then ``os.replace``; a reader sees the
  old file or the new one, never a partial one (last writer wins).
- :func:`link_json_exclusive`: a temporary file, then ``os.link`` to the final name; like ``O_CREAT|O_EXCL``
  (the first writer wins, ``FileExistsError`` for the others) but never visible half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["link_json_exclusive", "read_json", "write_json_atomic"]


def read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def link_json_exclusive(path: Path, payload: Any) -> dict[str, Any] | None:
    """Create `path` holding `payload` unless it exists. Returns None if created, else the existing content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, separators=(",", ":"))
        try:
            os.link(tmp, path)  # atomic and exclusive (EEXIST), and the file is complete when it appears
        except FileExistsError:
            return read_json(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return None

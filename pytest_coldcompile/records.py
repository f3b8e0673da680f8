"""The files a cold child leaves in its private directory, and the records it writes there.

The child appends one JSON line per record (a report, a warning, its summary, an error); the
parent reads them back. A line is one write, so a kill leaves whole lines behind.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# Files in a cold test's private directory; the parent reads them back.
SPEC_FILE = "child-spec.json"
RECORDS = "records.jsonl"
RAW_OUT, RAW_ERR = "raw-stdout", "raw-stderr"
CAPTURED_OUT, CAPTURED_ERR = "captured-stdout", "captured-stderr"
CACHES = "caches"


def write_record(test_dir: str, record: dict[str, Any]) -> None:
    """Append one JSON line; each is one write, so a kill leaves whole lines behind."""
    line = (json.dumps(_encode(record), default=_jsonable) + "\n").encode()
    fd = os.open(os.path.join(test_dir, RECORDS), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_records(test_dir: str) -> list[dict[str, Any]]:
    """Every whole record of test_dir's record file, in order; a line cut short by a kill, or
    no file at all (a child that never started), gives nothing."""
    try:
        with open(os.path.join(test_dir, RECORDS), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line, object_hook=decode_hook))
        except ValueError:
            continue
    return out


def _encode(value: Any) -> Any:
    # JSON has no tuples, but pytest's reports hold some (a skip's longrepr, sections,
    # user_properties) and their consumers check for them.
    if isinstance(value, tuple):
        return {TUPLE: [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def decode_hook(obj: dict[str, Any]) -> Any:
    """json object_hook undoing _encode."""
    if len(obj) == 1 and TUPLE in obj:
        return tuple(obj[TUPLE])
    return obj


TUPLE = "__coldcompile_tuple__"


def _jsonable(value: Any) -> Any:
    # user_properties may hold anything; xdist has the same limit and stringifies too.
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def redirect_std_fds(test_dir: str) -> None:
    """Point this process's fds 0, 1 and 2 at /dev/null and test_dir's raw output files, which
    the parent reads even when the child is killed."""
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, name in ((1, RAW_OUT), (2, RAW_ERR)):
        raw = os.open(os.path.join(test_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(raw, fd)
        os.close(raw)

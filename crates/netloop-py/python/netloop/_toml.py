"""Writes the topology a :class:`netloop.Network` describes as TOML text.

The Rust loader reads that text exactly as it reads a topology file, so a
network built in Python gets the same checks and the same error messages
(naming the item and the field) as one written by hand. Only what a topology
holds is supported: tables, arrays of tables, strings, numbers, booleans and
lists of those.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping


def value(v: Any, where: str) -> str:
    """One TOML value; ``where`` names it in the error for anything else."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{where}: {v!r} is not a finite number")
        return repr(v)
    if isinstance(v, str):
        # A JSON string is a valid TOML basic string (same escapes).
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x, f"{where}[{i}]") for i, x in enumerate(v)) + "]"
    if isinstance(v, Mapping):
        items = ", ".join(f"{key(k)} = {value(x, f'{where}.{k}')}" for k, x in v.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"{where}: {type(v).__name__} {v!r} cannot go into a topology (use str, int, float, bool, list or dict)")


def key(k: Any) -> str:
    if not isinstance(k, str):
        raise TypeError(f"topology keys are strings, not {type(k).__name__} {k!r}")
    if k and all(c.isalnum() or c in "_-" for c in k):
        return k
    return json.dumps(k)


def table(header: str, fields: Mapping[str, Any], where: str) -> str:
    """``[header]`` or ``[[header]]`` with its fields, sub-tables last."""
    plain = {k: v for k, v in fields.items() if v is not None and not _is_subtables(v)}
    lines = [header]
    lines += [f"{key(k)} = {value(v, f'{where}.{k}')}" for k, v in plain.items()]
    name = header.strip("[]")
    for k, v in fields.items():
        if v is None or k in plain:
            continue
        if isinstance(v, Mapping):
            lines.append(table(f"[{name}.{key(k)}]", v, f"{where}.{k}"))
        else:
            for i, sub in enumerate(v):
                lines.append(table(f"[[{name}.{key(k)}]]", sub, f"{where}.{k}[{i}]"))
    return "\n".join(lines) + "\n"


def _is_subtables(v: Any) -> bool:
    """A dict written as its own table, or a list of dicts as [[...]]."""
    if isinstance(v, Mapping):
        return any(isinstance(x, Mapping) for x in v.values())
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, Mapping) for x in v)


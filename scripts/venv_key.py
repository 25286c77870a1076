"""The cache key of a shared virtualenv: what decides its install, hashed (16 hex digits).

scripts/bootstrap.sh (newest-<key>) and scripts/compat.sh (oldest-<key>) both name their venv by
it, so a fresh clone reuses an install made from the same constraints and dependencies. Only
pyproject.toml's requires-python, dependencies and optional-dependencies count, not its tool
settings, which other changes touch. Runs under any python3: without tomllib (3.10) the whole
pyproject.toml counts instead.

    python3 scripts/venv_key.py CONSTRAINTS_FILE [TAG]

TAG (e.g. bootstrap's `extras=test,...`) is hashed after the dependencies.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

KEY_DIGITS = 16


def dependencies(pyproject: Path) -> str:
    try:
        import tomllib
    except ModuleNotFoundError:
        return pyproject.read_text().rstrip("\n")  # as the shell's $(cat pyproject.toml) gave it
    project = tomllib.loads(pyproject.read_text())["project"]
    return json.dumps([project[key] for key in ("requires-python", "dependencies", "optional-dependencies")])


def venv_key(constraints: Path, pyproject: Path, tag: str = "") -> str:
    decides = constraints.read_bytes() + f"{dependencies(pyproject)}{' ' + tag if tag else ''}\n".encode()
    return hashlib.sha256(decides).hexdigest()[:KEY_DIGITS]


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: venv_key.py CONSTRAINTS_FILE [TAG]", file=sys.stderr)
        return 2
    constraints = Path(argv[0])
    if not constraints.is_file():
        print(f"venv_key: no constraints file {constraints}", file=sys.stderr)
        return 2
    print(venv_key(constraints, Path(__file__).resolve().parent.parent / "pyproject.toml", *argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

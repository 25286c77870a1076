"""The atheris targets (tests/fuzz/atheris): which there are, how one is loaded, and where its
inputs live. Shared by the campaign (scripts/atheris_campaign.py) and the regression test that
replays the inputs without atheris (tests/fuzz/test_atheris_regressions.py).

A target is loaded from its file: the directory is not a package, as one named ``atheris`` on
the path would shadow the fuzzer itself.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TARGETS_DIR = Path(__file__).resolve().parents[1] / "fuzz" / "atheris"


def target_names() -> list[str]:
    """Every target: one module per entry point, each with ``TestOneInput(data: bytes)``."""
    return sorted(path.stem for path in TARGETS_DIR.glob("*.py"))


def load_target(name: str) -> ModuleType:
    path = TARGETS_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"atheris_target_{name}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ValueError(f"no atheris target {name!r}: expected {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus_dir(name: str) -> Path:
    """The seed corpus in the repository: valid examples and the Hypothesis targets' regressions."""
    return TARGETS_DIR / "corpus" / name


def crashers_dir(name: str) -> Path:
    """Inputs that found a bug: libFuzzer writes each finding here, and it stays as a regression case."""
    return TARGETS_DIR / "crashers" / name


def kept_inputs(name: str) -> list[Path]:
    """The target's seed corpus and crashers, as the regression test replays them."""
    return sorted(path for folder in (corpus_dir(name), crashers_dir(name)) for path in folder.glob("*"))

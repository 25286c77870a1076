"""Putting fake_spark_submit.py on PATH as `spark-submit`, for tests of the operator's Airflow side."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FAKE = Path(__file__).resolve().parent / "fake_spark_submit.py"


@dataclass
class FakeSpark:
    directory: Path
    monkeypatch: pytest.MonkeyPatch

    def mode(self, mode: str) -> None:
        self.monkeypatch.setenv("FAKE_SPARK_MODE", mode)

    def record(self) -> dict[str, Any]:
        return json.loads((self.directory / "record.json").read_text())

    @property
    def fifo(self) -> Path:
        return self.directory / "ready.fifo"


def install_fake_spark(directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSpark:
    """`spark-submit` on PATH runs the fake (mode ``commit``), recording into `directory`."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SPARK_RECORD", str(directory / "record.json"))
    monkeypatch.setenv("FAKE_SPARK_READY", str(directory / "ready.fifo"))
    os.mkfifo(directory / "ready.fifo")
    fake = FakeSpark(directory, monkeypatch)
    fake.mode("commit")
    return fake

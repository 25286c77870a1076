"""`make fuzz-atheris`'s runner, run for real on two targets with a few hundred runs each: its
table reads libFuzzer's own statistics. Needs atheris (the [fuzz] extra), which `make test`
does not install: skipped there, run wherever `make fuzz-atheris` has installed it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: Not `importorskip`: with tests/fuzz on the path, the targets' directory itself imports as a
#: namespace package called atheris. The fuzzer is a module with a file.
_ATHERIS = importlib.util.find_spec("atheris")
pytestmark = pytest.mark.skipif(
    _ATHERIS is None or _ATHERIS.origin is None, reason="atheris is not installed (the [fuzz] extra)"
)
CAMPAIGN = Path(__file__).resolve().parents[2] / "scripts" / "atheris_campaign.py"


def test_a_short_campaign_reports_each_targets_executions_coverage_and_findings(tmp_path: Path) -> None:
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    finished = subprocess.run(
        [sys.executable, str(CAMPAIGN), "--runs", "300", "job_ids", "conflict_modes"],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    table = finished.stdout.splitlines()[-4:]
    assert table[0].split() == ["target", "executions", "cov", "ft", "corpus", "findings"]
    for line, target in zip(table[1:3], ("job_ids", "conflict_modes"), strict=True):
        name, executions, cov, ft, corpus, findings = line.split()
        assert (name, executions, findings) == (target, "300", "none"), line
        assert int(cov) > 0 and int(ft) >= int(cov) and int(corpus) > 0, line
        assert (tmp_path / "airflow-commit-provider" / "atheris" / f"{target}.log").is_file()
    assert re.fullmatch(r"total: 600 executions over 2 targets, 0 with findings", table[3])

"""Smoke test of the benchmarks: every scenario runs at `tiny` size, once, into a temporary
directory, and writes well-formed results. No timing is asserted: benchmarks never decide
whether the suite passes; this only keeps the scenarios from rotting.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

# Every scenario in one test, each starting its own processes (the scale scenario alone commits
# eight points in fresh ones): more than the suite's 600 s default when the host is busy.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

TOP_LEVEL_KEYS = {
    "schema_version",
    "scenario",
    "title",
    "size",
    "repeat",
    "parameters",
    "comparisons",
    "checks",
    "measurements",
    "notes",
    "started_at",
    "seconds",
    "environment",
}
STATS_KEYS = {"median", "min", "max", "values"}


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def test_every_scenario_runs_at_tiny_size(tmp_path: Path, embedded_s3: EmbeddedS3) -> None:
    from bench.__main__ import main
    from bench.report import ORDER as SCENARIOS

    out = tmp_path / "results"
    documents = main(
        ["--scenario", "all", "--size", "tiny", "--repeat", "1", "--out", str(out)], embedded_s3=embedded_s3
    )

    assert set(documents) == set(SCENARIOS)
    for name in SCENARIOS:
        document = json.loads((out / f"{name}.json").read_text())
        assert set(document) >= TOP_LEVEL_KEYS, f"{name}: missing {TOP_LEVEL_KEYS - set(document)}"
        assert document["scenario"] == name and document["size"] == "tiny" and document["repeat"] == 1
        assert {"host", "load_before", "load_after"} <= set(document["environment"])
        assert document["comparisons"], f"{name} compares nothing"
        for comparison in document["comparisons"]:
            for key in ("ours_stats", "baseline_stats", "ratio"):
                assert set(comparison[key]) >= STATS_KEYS, (name, comparison["name"], key)
                assert len(comparison[key]["values"]) == 1
            ratio = comparison["ratio"]
            assert all(_finite(ratio[k]) and ratio[k] > 0 for k in ("median", "min", "max")), comparison
            assert comparison["met"] in (True, False, None)
        for check in document["checks"]:
            assert all(_finite(check[k]) for k in ("median", "min", "max")), (name, check)
        for measurement, stats in document["measurements"].items():
            assert _finite(stats["median"]), (name, measurement)

    job_commit = json.loads((out / "job_commit.json").read_text())
    checks = {check["name"]: check for check in job_commit["checks"]}
    copies = [check for name, check in checks.items() if "CopyObject requests" in name]
    assert copies and all(check["median"] == 0 for check in copies)  # a count, not a timing

    report = (out / "REPORT.md").read_text()
    assert "| Scenario |" in report
    for name in SCENARIOS:
        assert name in report
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

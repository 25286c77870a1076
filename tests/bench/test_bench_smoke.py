"""Smoke test of the benchmarks: every scenario runs at `tiny` size, once, into a temporary
directory, and writes well-formed results and a report naming it. No timing is asserted:
benchmarks never decide whether the suite passes; this only keeps the scenarios from rotting.
One test per scenario, so each has its own time limit and a failure names its scenario.

Every scenario runs on the suite's one Spark session (the `spark` fixture) and its embedded S3, as
`--scenario all` runs them on one session: `BenchEnv` leaves a session it did not start running and
undoes the settings it made on it. A session of its own per scenario (a SparkContext and a Derby
metastore each, nine times over) proved nothing the shared one does not.

The report and its chart are built once, from every scenario's results, by the module's last test
(`test_report_and_charts`), as `--scenario all` builds them once: built after each
scenario, the chart alone cost 2-3 s of CPU sixteen times over.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

# A scenario starts processes of its own (the scale scenario alone commits eight points in fresh
# ones): more than the suite's 600 s default when the host is busy.
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


#: Scenarios that write to HDFS: they run on the session's Hadoop cluster (`hadoop_cluster`, which
#: the side lane's tests/hadoop start anyway) rather than one of their own.
HDFS_SCENARIOS = ("hdfs", "hdfs_replace")


def _scenarios() -> list[Any]:
    from bench.report import ORDER

    return [
        pytest.param(name, marks=pytest.mark.hadoop_cluster) if name in HDFS_SCENARIOS else name
        for name in ORDER
    ]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One results folder for the module's scenarios, as `--scenario all` would fill it."""
    return tmp_path_factory.mktemp("results")


@pytest.mark.parametrize("name", _scenarios())
def test_scenario_runs_at_tiny_size(
    name: str, results: Path, embedded_s3: EmbeddedS3, spark: SparkSession, request: pytest.FixtureRequest
) -> None:
    from bench.__main__ import main
    from bench.report import load_results, markdown

    documents = main(
        ["--scenario", name, "--size", "tiny", "--repeat", "1", "--out", str(results)],
        embedded_s3=embedded_s3,
        report=False,
        hadoop_cluster=request.getfixturevalue("hadoop_cluster") if name in HDFS_SCENARIOS else None,
    )

    assert set(documents) == {name}
    document = json.loads((results / f"{name}.json").read_text())
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
    if name == "job_commit":
        copies = [check for check in document["checks"] if "CopyObject requests" in check["name"]]
        assert copies and all(check["median"] == 0 for check in copies)  # a count, not a timing
    if name == "hdfs_replace":  # the tiny table's days, each swapped in by the job commit
        assert document["measurements"]["ours: partitions swapped"]["median"] == 4
    if name == "hdfs":  # counted by the NameNode, read after each write: every variant's calls are there
        calls = [check for check in document["checks"] if check["name"].startswith("NameNode calls per file")]
        assert len(calls) == 4 and all(check["median"] > 0 for check in calls)

    assert spark.sparkContext._jsc is not None, f"{name} stopped the shared session"

    # The report's text of the results so far (its charts: `test_report_and_charts`).
    report = markdown(load_results(results))
    assert "| Scenario |" in report and f"| {name} | " in report and f"## {document['title']}\n" in report


def test_report_and_charts(results: Path) -> None:
    """After the scenarios (the module's order): the report of all their results, with its chart
    (a PNG) and the scale scenario's curve charts, names each. Run without them, it fails."""
    from bench.report import ORDER, write_report

    missing = sorted(set(ORDER) - {path.stem for path in results.glob("*.json")})
    assert not missing, f"no results of {missing}: run this module whole"
    report = write_report(results).read_text()
    for name in ORDER:
        assert f"| {name} | " in report, name
    charts = re.findall(r"\]\(([\w.-]+\.png)\)", report)  # the ratios' and the scale curve's
    assert "chart.png" in charts and len(charts) >= 2, charts
    for png in charts:
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png

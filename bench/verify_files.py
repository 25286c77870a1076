"""Scenario: `airflow-commit success verify --files` at any size (issue 28, "Done when": all 1M
entries checked in bounded memory).

Each point commits a magic job of N files on the in-process S3 stand-in (`bench.fake_s3`, labelled
as such: creating a million real objects on the embedded S3 would take hours) and measures one
`verify --files` of it in a fresh process (`bench.verify_files_memory`): the peak RSS above the RSS
just before the check, its seconds and client CPU, and its requests (one ranged GET of `_SUCCESS`,
the file list's reads, one listing of the destination). Every file must be found present.

Targets: at most `TARGET_MEMORY_MB` above the baseline at every size, and flat - the largest
point within `FLAT_MB` of the smallest - since the check holds nothing per file (the listing goes
through a sorted spool on local disk, the file list is read a row group at a time).
"""

from __future__ import annotations

import tempfile
from typing import Any

from bench.common import BenchEnv, ScenarioResult, child_json, log

TARGET_MEMORY_MB = 100.0
FLAT_MB = 32.0
STORE = "S3Store over the in-process S3 stand-in (bench.fake_s3)"


def run(env: BenchEnv) -> ScenarioResult:
    sizes = env.pick(tiny=[500, 1000], small=[10_000, 100_000], full=[10_000, 100_000, 1_000_000])
    result = ScenarioResult(
        "verify_files",
        "success verify --files: every listed file checked against one listing, in bounded memory",
        env.size,
        env.repeat,
        parameters={"files": sizes, "committer": "magic", "store": STORE, "baseline": "the smallest point"},
    )
    growth: dict[int, float] = {}
    for files in sizes:
        label = f"{files:,} files"
        check = result.check(
            f"verify --files peak RSS above baseline, {label}",
            unit="MB",
            target=TARGET_MEMORY_MB,
            note=f"{STORE}; fresh process per run; RSS sampled every 5 ms",
        )
        for turn in range(env.repeat):
            with tempfile.TemporaryDirectory(prefix="bench-verify-", dir=env.work_dir) as work:
                measured = _child(work, files)
            log(f"verify_files: {label} run {turn + 1}/{env.repeat}: {_brief(measured)}")
            found = measured["check"]
            if (found["present"], found["missing"], found["resized"]) != (files, 0, 0):
                raise RuntimeError(f"verify_files: {label}: the check did not find every file: {found}")
            check.values.append(measured["rss_growth_bytes"] / 1e6)
            result.measure(f"verify --files seconds, {label}", measured["seconds"])
            result.measure(f"verify --files client CPU seconds, {label}", measured["cpu_seconds"])
            result.measure(
                f"verify --files requests, {label}", sum(measured["requests"].values()), "requests"
            )
        growth[files] = min(check.values)
    smallest, largest = min(growth), max(growth)
    result.check(
        f"verify --files memory growth, {largest:,} against {smallest:,} files",
        unit="MB",
        target=FLAT_MB,
        note="the largest point's peak RSS growth minus the smallest's (best run of each): flat",
    ).values.append(growth[largest] - growth[smallest])
    return result


def _child(work: str, files: int) -> dict[str, Any]:
    return child_json("bench.verify_files_memory", ["--dir", work, "--files", str(files)])


def _brief(measured: dict[str, Any]) -> str:
    return (
        f"+{measured['rss_growth_bytes'] / 1e6:.1f} MB, {measured['seconds']} s, "
        f"CPU {measured['cpu_seconds']} s, requests {measured['requests']}"
    )

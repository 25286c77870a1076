"""The fuzz run's report: per target, its executions and what they gave (support/fuzzing.py counts
them), the package lines they reached (with FUZZ_COVERAGE=1, as `make fuzz` sets), and its finding
when it failed. Any run of tests/fuzz prints it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from support.fuzzing import EXAMPLES, OUTCOMES

import airflow_commit_provider

PACKAGE = str(Path(airflow_commit_provider.__file__).parent)
#: Per target: the (file, line) pairs of the package it executed.
REACHED: dict[str, set[tuple[str, int]]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if os.environ.get("FUZZ_COVERAGE") != "1":
        yield
        return
    lines = REACHED.setdefault(item.nodeid, set())

    def in_package(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return in_package

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        return in_package if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    failed = {report.nodeid for report in terminalreporter.stats.get("failed", [])}
    known = {report.nodeid for report in terminalreporter.stats.get("xfailed", [])}
    targets = sorted(OUTCOMES.keys() | {node for node in failed if node.startswith("tests/fuzz/")})
    if not targets:
        return
    terminalreporter.section(f"fuzz targets (up to {EXAMPLES} examples each: FUZZ_EXAMPLES)")
    terminalreporter.write_line(
        f"{'target':<66} {'executions':>10} {'accepted':>9} {'refused':>9} {'lines':>6}  finding"
    )
    for target in targets:
        counts = OUTCOMES.get(target, {})
        executions = counts.get("accepted", 0) + counts.get("refused", 0)
        lines = str(len(REACHED[target])) if target in REACHED else "-"
        terminalreporter.write_line(
            f"{target.removeprefix('tests/fuzz/'):<66} {executions:>10} {counts.get('accepted', 0):>9} "
            f"{counts.get('refused', 0):>9} {lines:>6}  {_finding(target, failed, known)}"
        )
    total = sum(sum(counts.values()) for counts in OUTCOMES.values())
    reached = len(set().union(*REACHED.values())) if REACHED else 0
    terminalreporter.write_line(
        f"total: {total} executions, {len(failed & set(targets))} target(s) with findings"
        + (f", {reached} package lines reached" if REACHED else "")
    )


def _finding(target: str, failed: set[str], known: set[str]) -> str:
    if target in failed:
        return "FAILED (see above)"
    return "open, kept as a strict xfail" if target in known else "none"

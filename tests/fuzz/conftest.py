"""The fuzz run's report: per target, its executions and what they gave (support/fuzzing.py counts
them), and its finding when it failed. `make fuzz` prints it after a campaign; any run shows it."""

from __future__ import annotations

import pytest
from support.fuzzing import EXAMPLES, OUTCOMES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    failed = {report.nodeid for report in terminalreporter.stats.get("failed", [])}
    targets = sorted(OUTCOMES.keys() | {node for node in failed if "tests/fuzz/" in node})
    if not targets:
        return
    terminalreporter.section(f"fuzz targets ({EXAMPLES} examples each, FUZZ_EXAMPLES)")
    terminalreporter.write_line(f"{'target':<72} {'executions':>10} {'accepted':>9} {'refused':>9}  finding")
    for target in targets:
        counts = OUTCOMES.get(target, {})
        executions = counts.get("accepted", 0) + counts.get("refused", 0)
        finding = "FAILED (see above)" if target in failed else "none"
        terminalreporter.write_line(
            f"{target.removeprefix('tests/fuzz/'):<72} {executions:>10} {counts.get('accepted', 0):>9} "
            f"{counts.get('refused', 0):>9}  {finding}"
        )
    total = sum(sum(counts.values()) for counts in OUTCOMES.values())
    terminalreporter.write_line(
        f"total executions: {total}; targets with findings: {len(failed & set(targets))}"
    )

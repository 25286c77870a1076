"""`doctor DESTINATION`: whether a store has what the committers rely on, probed under a scratch
prefix of the destination, and whether the bucket's lifecycle rules abort uploads sooner than the
longest job (`store_doctor`)."""

from __future__ import annotations

import argparse

from airflow_commit_provider.cli.arguments import CliError, store_for
from airflow_commit_provider.cli.output import emit, for_machines
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.check import CONDITIONAL_CREATE
from airflow_commit_provider.store_doctor import COMMIT_PROPERTIES, PROPERTIES, check_store


def doctor(args: argparse.Namespace) -> int:
    """`doctor`."""
    destination = StorePath.parse(args.destination)
    if args.writers < 2:
        raise CliError("--writers must be at least 2 to race")
    with store_for(args, args.destination).session() as store:
        longest = args.max_job_duration
        if longest is not None and not longest.total_seconds() > 0:
            raise CliError("--max-job-duration must be longer than 0s")
        report = check_store(
            store,
            destination,
            writers=args.writers,
            rounds=args.rounds,
            max_job_duration=longest.total_seconds() if longest is not None else None,
        )
    if for_machines(args):
        emit(
            {
                "store": report.store,
                "scratch": str(report.scratch),
                "ok": report.passed,
                "requests": report.requests,
                "note": report.note,
                "checks": [
                    {"property": c.name, "ok": c.passed, "warning": c.warning, "reason": c.reason}
                    for c in report.checks
                ],
                "lifecycle_rules": [
                    {
                        "id": rule.rule_id,
                        "days_after_initiation": rule.days,
                        "prefix": rule.prefix,
                        "size_filter": rule.sized,
                        "shortest_life_seconds": rule.shortest_life.total_seconds(),
                    }
                    for rule in report.lifecycle_rules
                ],
            },
            args,
        )
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"store: {escape(report.store)} (scratch {escape(str(report.scratch))}, removed)")
    if report.note:
        console.print(f"note: {escape(report.note)}")
    width = max(len(name) for name in PROPERTIES)
    for check in report.checks:
        verdict = (
            "[bold red]FAIL[/bold red]"
            if not check.passed
            else "[yellow]WARN[/yellow]"
            if check.warning
            else "[green]PASS[/green]"
        )
        console.print(f"{verdict}  {check.name:<{width}}  {escape(check.reason)}")
    failed = sum(not check.passed for check in report.checks)
    console.print(f"{len(report.checks)} properties, {failed} failed, {report.requests} requests")
    unsafe = [check.name for check in report.checks if check.name in COMMIT_PROPERTIES and not check.passed]
    if unsafe:
        console.print(
            f"the committers rely on {' and '.join(COMMIT_PROPERTIES)}: commits on this store are not safe "
            f"({', '.join(unsafe)} failed); job setup refuses a store that fails {CONDITIONAL_CREATE}"
        )
    return 0 if report.passed else 1

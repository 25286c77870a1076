"""`airflow-commit report DESTINATION`: what a commit did, read from its records; the command itself
is `report.command`'s, which the UI's report shares."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_commit_provider.cli.arguments import Parents, positive, store_for


def add_commands(groups: Any, parents: Parents) -> None:
    from airflow_commit_provider.report.command import add_arguments

    report = groups.add_parser(
        "report",
        parents=[parents.common],
        help="what a commit did: its tasks, job-commit phases and partitions, read from its records",
    )
    add_arguments(report, positive=positive).set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from airflow_commit_provider.report.command import run

    return run(args, store_for(args, args.destination))

"""`report DESTINATION`: what a commit did, read from its records; the command itself is
`report.command`'s."""

from __future__ import annotations

import argparse
from functools import partial

from airflow_commit_provider.cli.arguments import store_for
from airflow_commit_provider.cli.output import emit, for_machines


def report(args: argparse.Namespace) -> int:
    """`report`."""
    from airflow_commit_provider.report.command import run

    return run(
        args, store_for(args, args.destination), partial(emit, args=args) if for_machines(args) else None
    )

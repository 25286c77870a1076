"""`airflow-commit report DESTINATION [--job-id ID] [--html FILE]`: the commit report in a terminal."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.report.commit_report import CommitPage, list_commit_page, load_commit
from airflow_commit_provider.report.html import render_commit
from airflow_commit_provider.report.terminal import print_commit, print_commits


def add_arguments(parser: argparse.ArgumentParser, positive: Callable[[str], int]) -> argparse.ArgumentParser:
    """The arguments; `positive` parses the counts as the other commands do."""
    parser.add_argument(
        "destination",
        metavar="DESTINATION",
        help="a destination (a table's root folder): s3://bucket/prefix, file:///path",
    )
    parser.add_argument("--job-id", metavar="ID", help="the job to report (default: the most recent one)")
    # The first spelling, kept for the scripts that use it; every other command says --job-id.
    parser.add_argument("--job", dest="job_id", help=argparse.SUPPRESS)
    parser.add_argument(
        "--html", metavar="FILE", help="also write the report as one self-contained HTML file"
    )
    parser.add_argument(
        "--page", type=positive, default=1, help="page of the file list, 100 files each (default 1)"
    )
    parser.add_argument(
        "--partition-page",
        type=positive,
        default=1,
        help="page of the partition table, 100 partitions each (default 1)",
    )
    parser.add_argument("--limit", type=positive, default=20, help="recent commits listed (default 20)")
    parser.add_argument(
        "--after",
        metavar="CURSOR",
        help="list the commits older than those a previous list ended with (it prints the cursor)",
    )
    return parser


def run(args: argparse.Namespace, store: Store) -> int:
    """List the destination's recent commits (unless --job-id names one), then report one of them."""
    destination = StorePath.parse(args.destination)
    listed = (
        CommitPage([], None)
        if args.job_id
        else list_commit_page(store, destination, limit=args.limit, after=args.after, threads=args.threads)
    )
    commits = listed.commits
    job_id = args.job_id or (commits[0].job_id if commits else None)
    if job_id is None:
        raise ValueError(f"{destination.join(RECORDS_DIR).uri()}: no job records, so no commit to report")
    report = load_commit(
        store, destination, job_id, page=args.page - 1, partition_page=args.partition_page - 1
    )
    if args.json:
        print(
            json.dumps(
                {
                    "commits": [dataclasses.asdict(c) for c in commits],
                    "after": listed.after,
                    "report": dataclasses.asdict(report),
                },
                indent=2,
                default=str,
            )
        )
    else:
        console = Console()
        if commits:
            print_commits(console, destination.uri(), commits)
        if listed.after is not None:
            console.print(f"older commits: --after {listed.after}", markup=False, highlight=False)
        print_commit(console, report)
    if args.html:
        Path(args.html).write_text(render_commit(report, commits), encoding="utf-8")
        if not args.json:
            print(f"wrote {args.html}")
    return 0

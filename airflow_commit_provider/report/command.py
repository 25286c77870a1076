"""`report DESTINATION [--job-id ID] [--html FILE]`: the commit report in a terminal, or as one document
for machines (the CLI declares the arguments, `cli.definition`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.report.commit_report import CommitPage, list_commit_page, load_commit
from airflow_commit_provider.report.html import render_commit
from airflow_commit_provider.report.terminal import print_commit, print_commits


def run(args: argparse.Namespace, store: Store, emit: Callable[[dict[str, Any]], None] | None = None) -> int:
    """List the destination's recent commits (unless --job-id names one), then report one of them:
    to `emit` as one document when given (the CLI's -o json, yaml, plain), else for people."""
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
    if emit is not None:
        emit(
            {
                "commits": [dataclasses.asdict(c) for c in commits],
                "after": listed.after,
                "report": dataclasses.asdict(report),
            }
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
        if emit is None:
            print(f"wrote {args.html}")
    return 0

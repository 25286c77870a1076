"""`airflow-commit temp list|clean SCOPE`: the temporary trees failed and killed jobs leave in
their destinations (`cleanup.temp_trees`)."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_commit_provider.cleanup import (
    DEFAULT_OLDER_THAN,
    Progress,
    TempTree,
    TempTreeListing,
    clean_temp_trees,
    find_temp_trees,
    format_duration,
    format_size,
)
from airflow_commit_provider.cli.arguments import Parents, Parser, add_live_job_fence
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table
from airflow_commit_provider.core.store import Store


def add_commands(groups: Any, parents: Parents) -> None:
    scoped = parents.scoped(DEFAULT_OLDER_THAN)
    add_live_job_fence(scoped)
    nested = Parser(add_help=False)
    nested.add_argument("--nested", action="store_true", help="also search below subdirectories")
    commands = groups.add_parser("temp", help="temporary trees of failed jobs").add_subparsers(
        dest="command", required=True
    )
    commands.add_parser("list", parents=[scoped, nested], help="list temporary trees").set_defaults(
        handler=TEMP.show
    )
    commands.add_parser(
        "clean", parents=[scoped, nested, parents.destructive], help="delete stale temporary trees"
    ).set_defaults(handler=TEMP.list_confirm_act)


def _find(args: argparse.Namespace, store: Store, progress: Progress) -> TempTreeListing:
    return find_temp_trees(
        store,
        nested=args.nested,
        progress=progress,
        max_job_duration=args.max_job_duration,
        **selection(args),
    )


def _row(tree: TempTree) -> str:
    age = "-" if tree.age_seconds is None else format_duration(tree.age_seconds)
    state = "stale" if tree.stale else "commit" if tree.committing else "active"
    return f"{state:<7} {age:>7} {tree.files:>6} {format_size(tree.bytes):>10} {tree.uploads:>7}  {tree.path}"


TABLE = Table(f"{'STATE':<7} {'AGE':>7} {'FILES':>6} {'SIZE':>10} {'UPLOADS':>7}  TREE", _row)


def _question(args: argparse.Namespace, listing: TempTreeListing) -> str:
    return (
        f"Delete {listing.stale_count} stale temporary trees "
        f"({format_size(listing.stale_bytes)} in {listing.stale_files} files) under {listing.scope}?"
    )


TEMP = Cleanup(_find, TABLE, "delete temporary trees", _question, "Nothing deleted.", clean_temp_trees)

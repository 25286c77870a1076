"""`temp list|clean SCOPE`: the temporary trees failed and killed jobs leave in
their destinations (`cleanup.temp_trees`)."""

from __future__ import annotations

import argparse

from airflow_commit_provider.cleanup import (
    TempTree,
    TempTreeListing,
    clean_temp_trees,
    find_temp_trees,
    format_duration,
)
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import Progress, format_size


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


def list_trees(args: argparse.Namespace) -> int:
    """`temp list`."""
    return TEMP.show(args)


def clean_trees(args: argparse.Namespace) -> int:
    """`temp clean`."""
    return TEMP.list_confirm_act(args)

"""The one flow of the three cleanups (pending uploads, temporary trees, job records).

A list command lists with progress bars, then prints the listing in a machine format (-o) or as a table and its
closing line. A destructive command lists, shows and asks (unless --dry-run or --yes), acts, and
reports. Both read a listing through `CleanupListing` and a report through `CleanupReport` alone,
so the kinds' group modules say only what differs: how to list, the table's columns, the question
and the action.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from airflow_commit_provider.cleanup import CleanupListing, CleanupReport
from airflow_commit_provider.cli.arguments import scope_argument, scope_of, store_for
from airflow_commit_provider.cli.output import (
    Table,
    confirm,
    confirm_possible,
    emit_streamed,
    fail,
    for_machines,
    progress_for,
)
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import Progress

#: Items shown before asking, and in a dry run's output (both end with how many more there are).
ASK_PREVIEW, DRY_RUN_PREVIEW = 20, 50

ListingT = TypeVar("ListingT", bound=CleanupListing[Any])
ListingT_contra = TypeVar("ListingT_contra", bound=CleanupListing[Any], contravariant=True)

#: How a command lists: from its arguments, in the store, telling `Progress`.
Find = Callable[[argparse.Namespace, Store, Progress], ListingT]


class Act(Protocol[ListingT_contra]):
    """`abort_uploads`, `clean_temp_trees`, `prune_records`: act on a listing's targets."""

    def __call__(
        self,
        store: Store,
        listing: ListingT_contra,
        *,
        dry_run: bool,
        threads: int,
        progress: Progress | None,
        keep_outcomes: bool,
    ) -> CleanupReport[Any, Any]: ...


@dataclass(frozen=True)
class Cleanup(Generic[ListingT]):
    """One cleanup as its list and destructive commands run it: what the flow does not know."""

    find: Find[ListingT]
    table: Table[Any]
    action: str
    """What it does, as its refusal and its interruption say it: ``"abort uploads"``."""
    question: Callable[[argparse.Namespace, ListingT], str]
    declined: str
    act: Act[ListingT]

    def show(self, args: argparse.Namespace) -> int:
        """The list command: list with progress bars, then every item in the machine format (-o), or the table and the
        listing's closing line for people."""
        with store_for(args, scope_argument(args)[1]).session() as store, progress_for(args) as progress:
            listing = self.find(args, store, progress)
        try:
            if for_machines(args):
                items = (item.to_json() for item in listing.items())
                emit_streamed(listing.summary_json(), listing.DETAILS, items, args)
            else:
                self.table.print(listing.items())
                print(listing.describe())
        finally:
            listing.close()
        return 0

    def list_confirm_act(self, args: argparse.Namespace) -> int:
        """The destructive command: list, show and ask (unless --dry-run or --yes), act.

        Refuses before listing when a prompt would be needed that nobody can answer. Exits 1 when the
        user declines or anything failed. The closing line for people is what the report says of
        itself; failures follow it on stderr, one line each. Interrupted (Ctrl-C), it says that what
        was done stays done and that the same command finishes the rest.
        """
        scope_of(args)
        confirm_possible(args, self.action)
        with store_for(args, scope_argument(args)[1]).session() as store:
            with progress_for(args) as progress:
                listing = self.find(args, store, progress)
            try:
                count = listing.target_count
                if count and not args.dry_run and not args.yes:
                    self.table.print(listing.targets(), count, ASK_PREVIEW)
                    if not confirm(args, self.question(args, listing)):
                        print(self.declined, file=sys.stderr)
                        return 1
                try:
                    with progress_for(args) as progress:
                        report = self.act(
                            store,
                            listing,
                            dry_run=args.dry_run,
                            threads=args.threads,
                            progress=progress,
                            keep_outcomes=for_machines(args),
                        )
                except KeyboardInterrupt:
                    fail(
                        "interrupted: what was done stays done; "
                        f"run the same command again to {self.action} left"
                    )
                    return 130
                try:
                    return _print_report(args, listing, report, self.table)
                finally:
                    report.close()
            finally:
                listing.close()


def selection(args: argparse.Namespace) -> dict[str, Any]:
    """The options every listing takes from the command line; the scope is validated here too."""
    return {
        "scope": scope_of(args),
        "older_than": args.older_than,
        "job_id": args.job_id,
        "allow_bucket_root": args.allow_bucket_root,
        "threads": args.threads,
    }


def _print_report(
    args: argparse.Namespace, listing: CleanupListing[Any], report: CleanupReport[Any, Any], table: Table[Any]
) -> int:
    """Print what a destructive command did: every outcome in the machine format (-o), or the preview (dry run),
    the closing line and each listed failure for people. 1 when anything failed."""
    summary = report.to_json()
    if for_machines(args):
        emit_streamed(summary, listing.DETAILS, (outcome.to_json() for outcome in report.outcomes), args)
    else:
        if args.dry_run:
            table.print(listing.targets(), listing.target_count, DRY_RUN_PREVIEW)
        print(report.describe())
        for failure in summary["failures"]:  # what names the item (its path, or key and upload ID), then why
            where = " ".join(str(value) for key, value in failure.items() if key != "error")
            print(f"FAILED {where}: {failure['error']}", file=sys.stderr)
    return 1 if report.count("failed") else 0

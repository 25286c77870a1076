"""What every cleanup produces: a listing of one scope, then a report of acting on it.

Uploads and temporary trees differ in what they find and how they remove it, but not in how a
scope is selected, how a dry run differs from a real run, or how a report is summarised for
XCom and `--json`, or in words for people. That part lives here once, so every kind answers the
operators and the CLI in the same shape, and both print the same sentences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from airflow_commit_provider.core.cleanup.common import (
    SAMPLE_SIZE,
    NoProgress,
    Progress,
    utc_now,
)
from airflow_commit_provider.core.cleanup.durations import as_timedelta, format_duration
from airflow_commit_provider.core.cleanup.scope import parse_scope
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath

FAILED = "failed"
#: Failures a report lists; it counts all of them.
FAILURES_LISTED = 100

T = TypeVar("T")
ListingT = TypeVar("ListingT", bound="ScopedListing")
OutcomeT = TypeVar("OutcomeT", bound="Outcome")
ReportT = TypeVar("ReportT", bound="CleanupReport[Any, Any]")


class Outcome(Protocol):
    """What became of one listed item: all a report needs to know of it."""

    @property
    def status(self) -> str: ...

    @property
    def label(self) -> str:
        """How the item is named in a report's sample."""
        ...

    @property
    def error(self) -> str | None: ...

    def failure_json(self) -> dict[str, Any]:
        """The item's identifying fields, then `error`."""
        ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass
class ScopedListing:
    """The directory a cleanup looked in, and the age and job it selected by."""

    scope: StorePath
    older_than: timedelta
    now: datetime
    job_id: str | None
    other_jobs: int = 0
    """Items of other jobs seen and left alone (only with a `job_id`)."""

    @classmethod
    def select(
        cls: type[ListingT],
        scope: str | StorePath,
        *,
        older_than: timedelta | str | float,
        job_id: str | None,
        now: datetime | None,
        allow_bucket_root: bool,
    ) -> ListingT:
        """An empty listing, made only once the scope and age are valid: nothing is listed before."""
        directory = parse_scope(scope, allow_bucket_root=allow_bucket_root)
        return cls(directory, as_timedelta(older_than), utc_now(now), job_id)

    def selection_json(self) -> dict[str, Any]:
        return {
            "scope": str(self.scope),
            "older_than_seconds": self.older_than.total_seconds(),
            "now": self.now.isoformat(),
            "job_id": self.job_id,
        }


@dataclass
class CleanupReport(Generic[ListingT, OutcomeT]):
    """What a cleanup did to the items of a listing or, in a dry run, would have done."""

    listing: ListingT
    dry_run: bool
    outcomes: list[OutcomeT]
    seconds: float

    #: Statuses of the items removed (or, in a dry run, to be removed).
    ACTED: ClassVar[tuple[str, ...]]
    #: The key under which `to_json(details=True)` lists every outcome.
    DETAILS: ClassVar[str]
    #: What is done to an item, and its participle: ``("abort", "aborted")``.
    ACTION: ClassVar[tuple[str, str]]
    #: How a number of items reads in a sentence: ``"{} uploads"``.
    ITEMS: ClassVar[str]

    @classmethod
    def run(
        cls: type[ReportT],
        listing: Any,
        targets: Sequence[T],
        act: Callable[[T], Any],
        preview: Callable[[T], Any],
        *,
        dry_run: bool,
        description: str,
        threads: int,
        progress: Progress | None,
    ) -> ReportT:
        """`act` on every target in parallel or, with `dry_run`, only `preview` each: timed."""
        return cls.run_all(
            listing,
            targets,
            lambda items, bar: list(parallel_map(items, act, threads, bar)),
            preview,
            dry_run=dry_run,
            description=description,
            progress=progress,
        )

    @classmethod
    def run_all(
        cls: type[ReportT],
        listing: Any,
        targets: Sequence[T],
        act_all: Callable[[Sequence[T], Progress], list[Any]],
        preview: Callable[[T], Any],
        *,
        dry_run: bool,
        description: str,
        progress: Progress | None,
    ) -> ReportT:
        """`act_all` on the targets at once (one outcome each, in order) or, dry, `preview` each."""
        started = time.monotonic()
        if dry_run:
            outcomes = [preview(target) for target in targets]
        else:
            progress = progress or NoProgress()
            progress.start(description, len(targets))
            outcomes = act_all(targets, progress)
        return cls(listing, dry_run, outcomes, time.monotonic() - started)

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    @property
    def failed(self) -> list[OutcomeT]:
        return [outcome for outcome in self.outcomes if outcome.status == FAILED]

    @property
    def acted(self) -> list[OutcomeT]:
        return [outcome for outcome in self.outcomes if outcome.status in self.ACTED]

    def to_json(self, sample: int | None = SAMPLE_SIZE, details: bool = False) -> dict[str, Any]:
        """Counts, bytes and a sample of items (XCom-sized); `details` adds every item's outcome."""
        acted = self.acted
        result = {
            "scope": str(self.listing.scope),
            "dry_run": self.dry_run,
            "older_than_seconds": self.listing.older_than.total_seconds(),
            "job_id": self.listing.job_id,
            "now": self.listing.now.isoformat(),
            **self._counts(acted),
            "seconds": round(self.seconds, 3),
            "sample": [o.label for o in (acted if sample is None else acted[:sample])],
            "failures": [o.failure_json() for o in self.failed[:FAILURES_LISTED]],
        }
        if details:
            result[self.DETAILS] = [o.to_json() for o in self.outcomes]
        return result

    def describe(self) -> str:
        """The closing line for people, which the CLI prints and the operators log: what was done
        (or, dry, would be done), what was left alone and why, and how many items failed."""
        verb, participle = self.ACTION
        done = f"Would {verb}" if self.dry_run else participle.capitalize()
        age = format_duration(self.listing.older_than.total_seconds())
        return (
            f"{done} {self.ITEMS.format(len(self.acted))} older than {age} {self._where()}: "
            f"{self._details(self._counts(self.acted))}; {len(self.failed)} failed in {self.seconds:.1f}s"
            f"{' (dry run)' if self.dry_run else ''}"
        )

    def failure_message(self) -> str | None:
        """Why the cleanup as a whole failed (how many items, where, the first and its error);
        None when nothing failed."""
        failed = self.failed
        if not failed:
            return None
        items = self.ITEMS.format(f"{len(failed)} of {len(self.outcomes)}")
        return (
            f"{items} {self._where()} could not be {self.ACTION[1]}; "
            f"first: {failed[0].label} ({failed[0].error})"
        )

    def _where(self) -> str:
        return f"under {self.listing.scope}"

    def _counts(self, acted: list[OutcomeT]) -> dict[str, Any]:
        """The kind's own counts and sizes, which `to_json` puts between selection and timing."""
        raise NotImplementedError

    def _details(self, counts: dict[str, Any]) -> str:
        """What `describe` says of `counts` (`_counts`) between the items acted on and the failures."""
        raise NotImplementedError

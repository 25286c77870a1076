"""What every cleanup produces: a listing of one scope, then a report of acting on it.

Uploads, temporary trees and job records differ in what they find and how they remove it, but
not in how a scope is selected, how a dry run differs from a real run, or how a listing and a
report are summarised for XCom and the CLI's `-o json`, or in words for people. That part lives here once
(`CleanupListing`, `Outcome`, `CleanupReport`), so every kind answers the operators and the CLI in
the same shape, the CLI's one list, confirm and act flow serves all three, and both print the
same sentences.

A report's size does not grow with the scope: it keeps counts by status, sums (files, bytes),
the acted-on items with the smallest names (`KEPT_OUTCOMES`, for samples and lineage) and the
first failures. Every outcome is kept only when asked (`keep_outcomes`, the CLI's `-o json`), and
then in a local spool, not in memory.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from airflow_commit_provider.cleanup.common import SAMPLE_SIZE, STOP_AFTER_FAILURES, utc_now
from airflow_commit_provider.cleanup.scope import parse_scope
from airflow_commit_provider.cleanup.spool import Spool
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.durations import as_timedelta, format_duration
from airflow_commit_provider.progress import NoProgress, Progress

FAILED = "failed"
#: Items a run did not try because it stopped after `STOP_AFTER_FAILURES` failures in a row.
NOT_TRIED = "not-tried"
#: Failures a report lists; it counts all of them.
FAILURES_LISTED = 100
#: Acted-on outcomes a report keeps, those with the smallest labels: enough for the sample in
#: XCom and for the datasets OpenLineage names (`lineage.py` needs 149).
KEPT_OUTCOMES = 200

T = TypeVar("T")
ListingT = TypeVar("ListingT", bound="ScopedListing")
OutcomeT = TypeVar("OutcomeT", bound="Outcome")
ReportT = TypeVar("ReportT", bound="CleanupReport[Any, Any]")
ListedT = TypeVar("ListedT", bound="Listed", covariant=True)


class Listed(Protocol):
    """One item a cleanup listed: a pending upload, a temporary tree, the records of a job."""

    def to_json(self) -> dict[str, Any]: ...


class CleanupListing(Protocol[ListedT]):
    """What a cleanup found in its scope, as every kind answers it.

    The CLI lists, asks and acts through this alone, the same way for uploads, temporary trees and
    job records; the items are streamed (from a local spool), so a listing can be a million long.
    """

    #: The key under which `-o json` lists every item, and every outcome once acted on.
    DETAILS: ClassVar[str]

    @property
    def scope(self) -> StorePath: ...

    @property
    def older_than(self) -> timedelta: ...

    def items(self) -> Iterable[ListedT]:
        """Every item listed, in listing order."""
        ...

    def targets(self) -> Iterable[ListedT]:
        """The items the cleanup acts on (all of them, or the stale ones), in listing order."""
        ...

    @property
    def target_count(self) -> int: ...

    def summary_json(self) -> dict[str, Any]:
        """The selection and the counts, without the items."""
        ...

    def describe(self) -> str:
        """The closing line of a listing for people: what was found, what may go, what stays and why."""
        ...

    def close(self) -> None: ...


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

    @property
    def measures(self) -> Mapping[str, int]:
        """What the report adds up over every outcome (files and bytes removed, repeats...)."""
        ...

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
        return cls(
            parse_scope(scope, allow_bucket_root=allow_bucket_root),
            as_timedelta(older_than),
            utc_now(now),
            job_id,
        )

    def selection_json(self) -> dict[str, Any]:
        return {
            "scope": str(self.scope),
            "older_than_seconds": self.older_than.total_seconds(),
            "now": self.now.isoformat(),
            "job_id": self.job_id,
        }

    @property
    def age(self) -> str:
        """`older_than` as people write it (`1d`, `90s`), as every sentence about the listing says it."""
        return format_duration(self.older_than.total_seconds())

    def close(self) -> None:
        """Release the local files the listing keeps its items in."""


class CleanupReport(Generic[ListingT, OutcomeT]):
    """What a cleanup did to the items of a listing or, in a dry run, would have done.

    Outcomes are `record`ed as they happen (from any thread); the report keeps what is bounded.
    """

    #: Statuses of the items removed (or, in a dry run, to be removed).
    ACTED: ClassVar[tuple[str, ...]]
    #: What is done to an item, and its participle: ``("abort", "aborted")``.
    ACTION: ClassVar[tuple[str, str]]
    #: How a number of items reads in a sentence: ``"{} uploads"``.
    ITEMS: ClassVar[str]

    def __init__(self, listing: ListingT, dry_run: bool, *, keep_outcomes: bool = False) -> None:
        self.listing = listing
        self.dry_run = dry_run
        self.seconds = 0.0
        self.counts: Counter[str] = Counter()
        """Outcomes by status."""
        self.totals: Counter[str] = Counter()
        """The outcomes' `measures`, added up."""
        self.failed: list[OutcomeT] = []
        """The first `FAILURES_LISTED` failures (`count(FAILED)` counts them all)."""
        self._outcomes: Spool[OutcomeT] | None = Spool() if keep_outcomes else None
        self._kept: list[tuple[str, int, OutcomeT]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    @classmethod
    def from_outcomes(
        cls: type[ReportT], listing: Any, dry_run: bool, outcomes: Iterable[Any], seconds: float = 0.0
    ) -> ReportT:
        """A report of outcomes already known (every one kept)."""
        report = cls(listing, dry_run, keep_outcomes=True)
        for outcome in outcomes:
            report.record(outcome)
        report.seconds = seconds
        return report

    @classmethod
    def run_all(
        cls: type[ReportT],
        listing: Any,
        targets: Iterable[T],
        act_all: Callable[[Iterable[T], Callable[[Any], None], Progress], None],
        preview: Callable[[T], Any],
        *,
        dry_run: bool,
        description: str,
        total: int | None,
        progress: Progress | None,
        keep_outcomes: bool = False,
    ) -> ReportT:
        """`act_all(targets, record, progress)`, which records one outcome per target (from any
        thread), or, with `dry_run`, `preview` each target: timed. `progress` counts `total`."""
        report = cls(listing, dry_run, keep_outcomes=keep_outcomes)
        started = time.monotonic()
        try:
            if dry_run:
                for target in targets:
                    report.record(preview(target))
            else:
                progress = progress or NoProgress()
                progress.start(description, total)
                act_all(targets, report.record, progress)
        finally:
            report.seconds = time.monotonic() - started
        return report

    def record(self, outcome: OutcomeT) -> None:
        """Count one outcome, keep it if it is among the smallest acted on or the first failures."""
        with self._lock:
            self.counts[outcome.status] += 1
            for (
                name,
                value,
            ) in outcome.measures.items():  # not Counter.update: its isinstance(Mapping) is slow
                self.totals[name] += value
            if outcome.status == FAILED and len(self.failed) < FAILURES_LISTED:
                self.failed.append(outcome)
            if outcome.status in self.ACTED:
                entry = (outcome.label, next(self._order), outcome)
                if len(self._kept) < KEPT_OUTCOMES or entry[:2] < self._kept[-1][:2]:
                    bisect.insort(self._kept, entry, key=lambda kept: kept[:2])
                    del self._kept[KEPT_OUTCOMES:]
            if self._outcomes is not None:
                self._outcomes.append(outcome)

    @property
    def outcomes(self) -> Spool[OutcomeT]:
        """Every outcome, in the order they happened (only when kept: `keep_outcomes`)."""
        if self._outcomes is None:
            raise ValueError("this report did not keep its outcomes: run it with keep_outcomes=True")
        return self._outcomes

    def count(self, status: str) -> int:
        return self.counts[status]

    @property
    def acted_count(self) -> int:
        return sum(self.counts[status] for status in self.ACTED)

    @property
    def total(self) -> int:
        """Outcomes of every status: the items listed for acting on."""
        return sum(self.counts.values())

    @property
    def kept(self) -> list[OutcomeT]:
        """The acted-on outcomes with the smallest labels, at most `KEPT_OUTCOMES`, in label order."""
        return [outcome for _label, _order, outcome in self._kept]

    def close(self) -> None:
        """Release the local files of the report and its listing."""
        if self._outcomes is not None:
            self._outcomes.close()
        self.listing.close()

    def to_json(self, sample: int = SAMPLE_SIZE) -> dict[str, Any]:
        """Counts, bytes, and the first `sample` labels acted on (at most `KEPT_OUTCOMES`): XCom-sized."""
        return {
            "scope": str(self.listing.scope),
            "dry_run": self.dry_run,
            "older_than_seconds": self.listing.older_than.total_seconds(),
            "job_id": self.listing.job_id,
            "now": self.listing.now.isoformat(),
            **self._counts(),
            "not_tried": self.count(NOT_TRIED),
            "seconds": round(self.seconds, 3),
            "sample": [o.label for o in self.kept[:sample]],
            "failures": [o.failure_json() for o in self.failed],
        }

    def describe(self) -> str:
        """The closing line for people, which the CLI prints and the operators log: what was done
        (or, dry, would be done), what was left alone and why, and how many items failed."""
        verb, participle = self.ACTION
        done = f"Would {verb}" if self.dry_run else participle.capitalize()
        return (
            f"{done} {self.ITEMS.format(self.acted_count)} older than {self.listing.age} {self._where()}: "
            f"{self._details(self._counts())}; {self.count(FAILED)} failed in {self.seconds:.1f}s"
            f"{self._stopped()}{' (dry run)' if self.dry_run else ''}"
        )

    def failure_message(self) -> str | None:
        """Why the cleanup as a whole failed (how many items, where, the first and its error, and
        whether it stopped early); None when nothing failed."""
        if not self.failed:
            return None
        first = self.failed[0]
        items = self.ITEMS.format(f"{self.count(FAILED)} of {self.total}")
        return (
            f"{items} {self._where()} could not be {self.ACTION[1]}; "
            f"first: {first.label} ({first.error}){self._stopped()}"
        )

    def _stopped(self) -> str:
        not_tried = self.count(NOT_TRIED)
        if not not_tried:
            return ""
        return (
            f"; stopped after {STOP_AFTER_FAILURES} failures in a row with "
            f"{self.ITEMS.format(not_tried)} not tried: run it again to finish"
        )

    def _where(self) -> str:
        return f"under {self.listing.scope}"

    def _counts(self) -> dict[str, Any]:
        """The kind's own counts and sizes, which `to_json` puts between selection and timing."""
        raise NotImplementedError

    def _details(self, counts: dict[str, Any]) -> str:
        """What `describe` says of `counts` (`_counts`) between the items acted on and the failures."""
        raise NotImplementedError

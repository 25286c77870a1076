"""The bucket lifecycle rules that abort a job's pending uploads behind its back, and how soon.

The upload committers (magic, directory, partitioned) keep each file a pending multipart upload
from task commit until job commit completes it. A lifecycle rule with
``AbortIncompleteMultipartUpload`` removes such an upload ``DaysAfterInitiation`` days after it
was started, whoever still needs it: a job that runs longer loses files it already committed at
task level, and job commit fails (NoSuchUpload). So the doctor names these rules and job setup
refuses a job that could outlive one (`core.store.check.require_uploads_outlive_job`).

Which rules apply to a destination, as decided here:

- ``Status`` ``Enabled`` only, with ``AbortIncompleteMultipartUpload.DaysAfterInitiation``.
- Prefix (``Filter.Prefix``, ``Filter.And.Prefix`` or the legacy top-level ``Prefix``; none or
  empty is the whole bucket): the rule applies when an upload of the destination's files could
  match, that is when the prefix is a prefix of the destination's key + ``/`` (it covers all of
  it) or the other way round (it covers part of it: ``out/dataset1/day=2``). Key prefixes are
  plain string prefixes, so ``out/dataset1`` covers ``out/dataset10/`` too, and is reported for
  it: that is what S3 does.
- Tags (``Filter.Tag``, ``Filter.And.Tags``): never apply. A pending upload carries only the
  tags given when it was created, and the committers give none; AWS refuses the combination
  ("AbortIncompleteMultipartUpload cannot be specified with Tags"), so only another store could
  hold such a rule, and there it cannot select our uploads.
- Object size (``ObjectSizeGreaterThan``/``LessThan``, alone or in ``And``): taken to apply. AWS
  refuses the combination too, and a store that accepts it measures an upload that has no final
  size in its own way; a job writes files of any size, so the rule is assumed to reach them.

How soon: S3 adds the days to the initiation time and rounds the result up to the next midnight
UTC (AWS's example: initiated 1/15 10:30 UTC with 3 days is eligible 1/19 00:00 UTC), then aborts
at some time after that. An upload therefore lives at least ``days`` x 24 h (initiated just at
midnight; `earliest_abort` is exact for a given initiation) and up to a day more. The checks use
that lower bound, ``days`` x 24 h, so whether a job is accepted does not depend on the time of
day it starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_commit_provider.core.paths import StorePath

__all__ = [
    "UploadAbortRule",
    "earliest_abort",
    "lifecycle_hours",
    "outlived_by",
    "rules_for_destination",
    "upload_abort_rules",
]

DAY = timedelta(days=1)


@dataclass(frozen=True)
class UploadAbortRule:
    """An enabled lifecycle rule with ``AbortIncompleteMultipartUpload``, as far as it concerns us."""

    rule_id: str
    """The rule's ``ID``, or ``(rule N)`` (its place in the configuration) when it has none."""
    days: int
    """``DaysAfterInitiation``."""
    prefix: str
    """The key prefix it filters on; empty for the whole bucket."""
    tagged: bool
    """Whether it filters on tags (then it never selects our uploads: they carry none)."""
    sized: bool
    """Whether it filters on object size (then it is assumed to select them anyway)."""

    @property
    def shortest_life(self) -> timedelta:
        """The least time any upload it selects lives: ``days`` x 24 h (see the module doc)."""
        return self.days * DAY

    def reaches(self, destination: StorePath) -> bool:
        """Whether an upload of a file under `destination` can match this rule's filter."""
        if self.tagged:
            return False
        inside = destination.dir_prefix()
        return inside.startswith(self.prefix) or self.prefix.startswith(inside)

    def describe(self) -> str:
        scope = f"prefix {self.prefix!r}" if self.prefix else "the whole bucket"
        size = ", with an object-size filter taken to match" if self.sized else ""
        return (
            f"lifecycle rule {self.rule_id!r} ({scope}{size}) aborts incomplete uploads "
            f"{self.days} day{'s' if self.days != 1 else ''} after initiation (at least "
            f"{lifecycle_hours(self.shortest_life)})"
        )


def upload_abort_rules(rules: Iterable[Mapping[str, Any]]) -> list[UploadAbortRule]:
    """The enabled rules among `rules` (GetBucketLifecycleConfiguration's ``Rules``) that abort
    incomplete uploads; a rule whose ``DaysAfterInitiation`` is not a positive whole number is
    refused in a ValueError naming it."""
    found = []
    for place, rule in enumerate(rules, start=1):
        abort = rule.get("AbortIncompleteMultipartUpload") or {}
        if rule.get("Status") != "Enabled" or "DaysAfterInitiation" not in abort:
            continue
        rule_id = str(rule.get("ID") or f"(rule {place})")
        days = abort["DaysAfterInitiation"]
        if isinstance(days, bool) or not isinstance(days, int) or days < 1:
            raise ValueError(
                f"lifecycle rule {rule_id!r}: AbortIncompleteMultipartUpload.DaysAfterInitiation "
                f"must be a positive whole number, got {days!r}"
            )
        found.append(UploadAbortRule(rule_id, days, *_filter(rule)))
    return found


def rules_for_destination(rules: Iterable[UploadAbortRule], destination: StorePath) -> list[UploadAbortRule]:
    """The rules that can abort uploads of files under `destination`, shortest first."""
    return sorted((rule for rule in rules if rule.reaches(destination)), key=lambda r: (r.days, r.rule_id))


def outlived_by(rules: Iterable[UploadAbortRule], max_job_duration: float) -> list[UploadAbortRule]:
    """The rules that could abort an upload before a job of `max_job_duration` seconds ends: those
    whose `shortest_life` is shorter (the one comparison the doctor and job setup both make)."""
    return [rule for rule in rules if max_job_duration > rule.shortest_life.total_seconds()]


def earliest_abort(initiated: datetime, days: int) -> datetime:
    """When S3 may first abort an upload initiated at `initiated` under a `days` rule: the
    initiation plus the days, rounded up to midnight UTC (a time already at midnight stays)."""
    due = initiated.astimezone(timezone.utc) + days * DAY
    midnight = due.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight if midnight == due else midnight + DAY


def _filter(rule: Mapping[str, Any]) -> tuple[str, bool, bool]:
    """(prefix, tagged, sized) of a rule's filter, in any of its spellings."""
    where = rule.get("Filter")
    if where is None:  # the legacy rule: a top-level Prefix, nothing else
        return str(rule.get("Prefix") or ""), False, False
    both = where.get("And") or {}
    prefix = str(where.get("Prefix") or both.get("Prefix") or "")
    tagged = bool(where.get("Tag") or both.get("Tags"))
    sized = any(
        part.get(size) is not None
        for part in (where, both)
        for size in ("ObjectSizeGreaterThan", "ObjectSizeLessThan")
    )
    return prefix, tagged, sized


def lifecycle_hours(span: timedelta | float) -> str:
    """A span (or seconds) as the messages compare them: hours, e.g. ``24 h`` or ``30.5 h``."""
    seconds = span.total_seconds() if isinstance(span, timedelta) else span
    return f"{round(seconds / 3600, 2):g} h"

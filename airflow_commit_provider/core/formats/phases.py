"""The phases of a job commit as they ran, kept in the job record for the commit report.

Hadoop's `_SUCCESS` sums each stage's durations (`iostatistics`), which says how long the stages
took in all but not when each ran, or which requests each made: a report's timeline needs both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import optional_millis, require_field

#: The store's request counters (`op_get`, `op_put`...); its byte counters are not requests.
REQUEST_COUNTER_PREFIX = "op_"


@dataclass(frozen=True)
class CommitPhase:
    """One phase: its span in epoch milliseconds, and the store requests made meanwhile by kind."""

    name: str
    start: int
    end: int
    requests: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.end, "requests": self.requests}

    @classmethod
    def from_json(cls, value: object, source: str) -> CommitPhase:
        if not isinstance(value, dict):
            raise InvalidCommitDataError(f"{source}: a 'phases' entry is not an object")
        name = require_field(value, "name", str, source)
        where = f"{source} phase {name!r}"
        requests = value.get("requests") or {}
        if not isinstance(requests, dict) or not all(
            isinstance(count, int) and not isinstance(count, bool) and count >= 0
            for count in requests.values()
        ):
            raise InvalidCommitDataError(f"{where}: 'requests' is not an object of request counts")
        start, end = optional_millis(value, "start", where, 0), optional_millis(value, "end", where, 0)
        if end < start:
            raise InvalidCommitDataError(f"{where}: ends ({end}) before it starts ({start})")
        return cls(name, start, end, {str(kind): count for kind, count in requests.items()})


def request_counts(counters: dict[str, int]) -> dict[str, int]:
    """The request counts among a store's counters (`op_put` -> `put`)."""
    return {
        name[len(REQUEST_COUNTER_PREFIX) :]: count
        for name, count in sorted(counters.items())
        if name.startswith(REQUEST_COUNTER_PREFIX) and count
    }

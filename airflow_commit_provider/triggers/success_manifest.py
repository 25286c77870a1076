"""The trigger behind the deferrable ``SuccessManifestSensor``, and the check both share.

The check itself is core's ``check_success``. It costs one request, a single GET of ``_SUCCESS``
(a missing file is one failed GET), and a second when a ``job_id`` is expected and ``_SUCCESS`` is
absent or names another job: the GET of that job's record. A 0-byte legacy marker accepted with
``allow_legacy`` also costs a second request (its modification time).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import StoreError
from airflow_commit_provider.core.success_check import check_success, is_legacy

if TYPE_CHECKING:
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["SuccessCheckResult", "SuccessExpectations", "SuccessManifestTrigger", "parse_newer_than"]

#: Partitions listed in the XCom summary; the count is always exact.
SUMMARY_PARTITIONS = 100


def parse_newer_than(value: datetime | str | None) -> datetime | None:
    """A timezone-aware datetime from a datetime or an ISO-8601 string (rendered templates); naive = UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            import pendulum

            try:
                parsed = pendulum.parse(text)  # type: ignore[assignment]
            except Exception as error:
                raise ValueError(f"newer_than {value!r} is not an ISO-8601 date-time") from error
            if not isinstance(parsed, datetime):
                raise ValueError(f"newer_than {value!r} is not a date-time") from None
        value = parsed
    if not isinstance(value, datetime):
        raise TypeError(f"newer_than must be a datetime or an ISO-8601 string, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class SuccessCheckResult:
    """The outcome of one look at ``_SUCCESS``.

    ``missing``: no file yet. ``rejected``: a valid file that fails an expectation (``reasons``).
    ``accepted``: a valid file meeting every expectation (``summary`` is the XCom value). ``path`` is
    the file judged: the job's record when ``_SUCCESS`` named another job.
    """

    state: Literal["missing", "rejected", "accepted"]
    path: str
    reasons: tuple[str, ...] = ()
    summary: dict[str, Any] | None = None

    def describe(self) -> str:
        if self.state == "missing":
            return "; ".join(self.reasons) if self.reasons else f"{self.path} does not exist yet"
        if self.state == "rejected":
            return f"{self.path} does not qualify: {'; '.join(self.reasons)}"
        return f"{self.path} qualifies"


@dataclass(frozen=True)
class SuccessExpectations:
    """What a ``_SUCCESS`` must say to satisfy the sensor; every field is optional."""

    job_id: str | None = None
    committers: tuple[str, ...] | None = None
    min_files: int | None = None
    newer_than: datetime | None = None
    required_partitions: tuple[str, ...] = ()
    allow_legacy: bool = False

    @classmethod
    def build(
        cls,
        *,
        job_id: str | None = None,
        committers: str | Iterable[str] | None = None,
        min_files: int | str | None = None,
        newer_than: datetime | str | None = None,
        required_partitions: str | Iterable[str] | None = None,
        allow_legacy: bool = False,
    ) -> SuccessExpectations:
        """Normalise operator/trigger arguments (rendered templates arrive as strings)."""
        if isinstance(committers, str):
            committers = (committers,)
        if isinstance(required_partitions, str):
            required_partitions = (required_partitions,)
        return cls(
            job_id=job_id or None,
            committers=tuple(committers) if committers is not None else None,
            min_files=int(min_files) if min_files not in (None, "") else None,
            newer_than=parse_newer_than(newer_than),
            required_partitions=tuple(p for p in (required_partitions or ()) if p),
            allow_legacy=bool(allow_legacy),
        )

    def check(self, store: Store, location: str | os.PathLike[str] | StorePath) -> SuccessCheckResult:
        """Look once (core's ``check_success``: the ``_SUCCESS``, or the job's record) and judge it.

        Raises :class:`InvalidCommitDataError` (its subclass ``LegacySuccessMarkerError`` for a 0-byte
        marker unless ``allow_legacy``) when a file cannot be a valid ``_SUCCESS`` or job record at
        all, and ``StoreError`` when the store cannot be read.
        """
        found = check_success(
            store,
            location,
            job_id=self.job_id,
            committers=self.committers,
            min_files=self.min_files,
            newer_than=self.newer_than,
            required_partitions=self.required_partitions or None,
            allow_legacy=self.allow_legacy,
        )
        summary = None
        if found.state == "accepted" and found.data is not None:
            summary = xcom_summary(found.data, found.path, source=found.source)
        return SuccessCheckResult(found.state, str(found.path), found.reasons, summary)


def xcom_summary(data: SuccessData, path: StorePath, source: str = "_SUCCESS") -> dict[str, Any]:
    """The parsed ``_SUCCESS`` or job record as a small JSON-able dict (never the full file list)."""
    summary = data.summary()
    partitions = list(summary.get("partitions") or ())
    summary["partitions"] = partitions[:SUMMARY_PARTITIONS]
    summary["partition_count"] = len(partitions)
    summary["path"] = str(path)
    summary["source"] = source
    summary["legacy"] = is_legacy(data)
    return summary


class SuccessManifestTrigger(BaseTrigger):
    """Polls ``_SUCCESS`` every ``poke_interval`` seconds until it qualifies.

    Blocking store calls run in a worker thread (``asyncio.to_thread``); the event loop only sleeps.
    Events: ``{"status": "success", "summary": ...}``; ``{"status": "error", "kind": "invalid" |
    "rejected" | "store", "message": ...}`` for a file that can never qualify (``invalid``), a
    mismatch when ``fail_on_mismatch`` (``rejected``), or a store failure (``store``).
    """

    def __init__(
        self,
        *,
        path: str,
        aws_conn_id: str | None = "aws_default",
        poke_interval: float = 60.0,
        job_id: str | None = None,
        committers: Sequence[str] | None = None,
        min_files: int | None = None,
        newer_than: str | None = None,
        required_partitions: Sequence[str] | None = None,
        allow_legacy: bool = False,
        fail_on_mismatch: bool = False,
    ) -> None:
        super().__init__()
        self.path = path
        self.aws_conn_id = aws_conn_id
        self.poke_interval = float(poke_interval)
        self.job_id = job_id
        self.committers = list(committers) if committers is not None else None
        self.min_files = min_files
        self.newer_than = newer_than
        self.required_partitions = list(required_partitions or ())
        self.allow_legacy = allow_legacy
        self.fail_on_mismatch = fail_on_mismatch
        # Fail at construction (in the worker, before deferring), not in the triggerer.
        self.expectations = SuccessExpectations.build(
            job_id=job_id,
            committers=self.committers,
            min_files=min_files,
            newer_than=newer_than,
            required_partitions=self.required_partitions,
            allow_legacy=allow_legacy,
        )
        StorePath.parse(path)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "path": self.path,
                "aws_conn_id": self.aws_conn_id,
                "poke_interval": self.poke_interval,
                "job_id": self.job_id,
                "committers": self.committers,
                "min_files": self.min_files,
                "newer_than": self.newer_than,
                "required_partitions": self.required_partitions,
                "allow_legacy": self.allow_legacy,
                "fail_on_mismatch": self.fail_on_mismatch,
            },
        )

    def _open_store(self) -> Store:
        from airflow_commit_provider.hooks.commit_store import CommitStoreHook

        return CommitStoreHook(aws_conn_id=self.aws_conn_id, threads=1).get_store(self.path)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            store = await asyncio.to_thread(self._open_store)
        except Exception as error:
            yield TriggerEvent(_error("store", f"cannot open the store for {self.path}: {error}"))
            return
        try:
            last_description = None
            while True:
                try:
                    result = await asyncio.to_thread(self.expectations.check, store, self.path)
                except InvalidCommitDataError as error:
                    yield TriggerEvent(_error("invalid", str(error)))
                    return
                except StoreError as error:
                    yield TriggerEvent(_error("store", str(error)))
                    return
                if result.state == "accepted":
                    self.log.info("%s", result.describe())
                    yield TriggerEvent({"status": "success", "summary": result.summary})
                    return
                if result.state == "rejected" and self.fail_on_mismatch:
                    yield TriggerEvent(_error("rejected", result.describe()))
                    return
                description = result.describe()
                if description != last_description:
                    self.log.info("%s; checking again every %s s", description, self.poke_interval)
                    last_description = description
                await asyncio.sleep(self.poke_interval)
        finally:
            await asyncio.to_thread(store.close)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"status": "error", "kind": kind, "message": message}

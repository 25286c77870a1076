"""The trigger behind the deferrable ``SuccessManifestSensor``, and the check both share.

The check itself is core's ``check_success``. It costs one request, a single GET of ``_SUCCESS``
(a missing file is one failed GET), and a second when a ``job_id`` is expected and ``_SUCCESS`` is
absent or names another job: the GET of that job's record. A 0-byte legacy marker accepted with
``allow_legacy`` also costs a second request (its modification time).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import StoreError
from airflow_commit_provider.core.success_check import (
    CheckState,
    SuccessCheck,
    SuccessExpectations,
    is_legacy,
)

if TYPE_CHECKING:
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["SuccessCheckResult", "SuccessManifestTrigger"]

#: Partitions listed in the XCom summary; the count is always exact.
SUMMARY_PARTITIONS = 100


@dataclass(frozen=True)
class SuccessCheckResult:
    """Core's verdict on one look at ``_SUCCESS`` (or the job's record), with the XCom summary.

    ``summary`` is set when the verdict is ``accepted``; ``describe`` says why it is not otherwise.
    """

    found: SuccessCheck
    summary: dict[str, Any] | None = None

    @property
    def state(self) -> CheckState:
        return self.found.state

    def describe(self) -> str:
        return self.found.describe()

    @classmethod
    def from_check(cls, found: SuccessCheck) -> SuccessCheckResult:
        if found.state == "accepted" and found.data is not None:
            return cls(found, xcom_summary(found.data, found.path, source=found.source))
        return cls(found)


def xcom_summary(data: SuccessData, path: StorePath, source: str = SUCCESS_FILENAME) -> dict[str, Any]:
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
                    found = await asyncio.to_thread(self.expectations.check, store, self.path)
                except InvalidCommitDataError as error:
                    yield TriggerEvent(_error("invalid", str(error)))
                    return
                except StoreError as error:
                    yield TriggerEvent(_error("store", str(error)))
                    return
                result = SuccessCheckResult.from_check(found)
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

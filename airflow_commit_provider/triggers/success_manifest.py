"""The trigger behind the deferrable ``SuccessManifestSensor``.

The check itself is core's ``SuccessExpectations.check``. It costs one request, a single ranged
GET of at most 64 KiB (``SENSOR_READ_BYTES``) of ``_SUCCESS`` whatever the job wrote (a missing
file is one failed GET), and a second when a ``job_id`` is expected and ``_SUCCESS`` is absent or
names another job: the same read of that job's record. So a poke in the triggerer, which all DAGs
share, holds and parses at most 64 KiB per file read. Larger ``_SUCCESS`` files of Hadoop's
committers and older ones of ours (every file inline) are read whole, as before: one more GET. A
required partition past the 100 listed inline costs one more ranged GET of the job's partition list
for a list of some thousands of partitions. A 0-byte legacy marker accepted with ``allow_legacy``
also costs a second request (its modification time).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import StoreError
from airflow_commit_provider.success.check import SuccessExpectations

if TYPE_CHECKING:
    from airflow_commit_provider.core.store import Store

__all__ = ["SuccessManifestTrigger"]


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
        destination: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        poke_interval: float = 60.0,
        expectations: SuccessExpectations | Mapping[str, Any] | None = None,
        fail_on_mismatch: bool = False,
    ) -> None:
        """`expectations` may also be the mapping `serialize` wrote, from which the triggerer
        re-creates the trigger; None expects only a `_SUCCESS`."""
        super().__init__()
        self.destination = destination
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config
        self.poke_interval = float(poke_interval)
        if not isinstance(expectations, SuccessExpectations):
            expectations = SuccessExpectations.build(**(expectations or {}))
        self.expectations = expectations
        self.fail_on_mismatch = fail_on_mismatch
        StorePath.parse(destination)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "destination": self.destination,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "verify": self.verify,
                "botocore_config": self.botocore_config,
                "poke_interval": self.poke_interval,
                "expectations": self.expectations.to_dict(),
                "fail_on_mismatch": self.fail_on_mismatch,
            },
        )

    def _open_store(self) -> Store:
        from airflow_commit_provider.hooks.commit_store import CommitStoreHook

        hook = CommitStoreHook(
            self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=self.botocore_config,
            threads=1,  # one GET per poke
        )
        return hook.get_store(self.destination)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            store = await asyncio.to_thread(self._open_store)
        except Exception as error:
            yield TriggerEvent(_error("store", f"cannot open the store for {self.destination}: {error}"))
            return
        try:
            last_description = None
            while True:
                try:
                    found = await asyncio.to_thread(self.expectations.check, store, self.destination)
                except InvalidCommitDataError as error:
                    yield TriggerEvent(_error("invalid", str(error)))
                    return
                except StoreError as error:
                    yield TriggerEvent(_error("store", str(error)))
                    return
                if found.state == "accepted":
                    self.log.info("%s", found.describe())
                    yield TriggerEvent({"status": "success", "summary": found.xcom_summary()})
                    return
                if found.state == "rejected" and self.fail_on_mismatch:
                    yield TriggerEvent(_error("rejected", found.describe()))
                    return
                description = found.describe()
                if description != last_description:
                    self.log.info("%s; checking again every %s s", description, self.poke_interval)
                    last_description = description
                await asyncio.sleep(self.poke_interval)
        finally:
            await asyncio.to_thread(store.close)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"status": "error", "kind": kind, "message": message}

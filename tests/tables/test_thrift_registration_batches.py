"""Registering a job's partitions over Thrift in batches (issue 28, item 4): on the suite's Hive
metastore kept in PostgreSQL (``support.metastore_service``), ``HiveMetastoreCatalog.register_partitions``
asks in batches of its ``batch_size``, drawing the partitions as it goes, and the metastore then
holds exactly what was asked:

- all new: per batch one ``get_partitions_by_names`` and one ``add_partitions_req``;
- again: one ``get_partitions_by_names`` per batch (here one of 1,000) and nothing else, every
  partition as it was;
- a tenth moved (spread over every batch): one ``alter_partitions`` per batch, those partitions at
  their new folders and the others as they were.

``REGISTRATION_BATCH`` (1,000) partitions, registered in ten batches of a tenth of that: the
metastore writes each partition in a few database writes, so ten thousand (what
``bench/partitions.py`` measures at its full size) took minutes. Registering again asks in one
request of the default ``REGISTRATION_BATCH``, which the metastore answers whole.

The Thrift calls are counted by name (``devtools.metastore_client.CountingMetastoreCatalog``).

A metastore that fails in the middle (a fault-injecting client refusing the second add) leaves the
batches before it registered, and the error says how many partitions that is; registering again
finishes the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from airflow_commit_provider.core.catalog import (
    REGISTRATION_BATCH,
    CatalogUnreachableError,
    Partition,
    location_path,
)
from airflow_commit_provider.core.hive_metastore_catalog import HiveMetastoreCatalog
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from airflow_commit_provider.devtools.metastore_client import (
    CountingMetastoreCatalog,
    database,
    external_parquet_table,
    metastore_client,
)

#: The metastore's start (the first test here starts it) and its first requests on a cold JVM took
#: 400 s together on a two-core machine at load average 8: past the suite's default of 600 s under
#: more load.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

_T = TypeVar("_T")

DATABASE = "thrift_batches"
PARTITIONS = REGISTRATION_BATCH
BATCH = PARTITIONS // 10
BATCHES = PARTITIONS // BATCH
#: A Thrift call's timeout here: one batch of 1,000 new partitions took about 32 s on a loaded
#: two-core machine, within the catalog's default of 60 s, but the test must not depend on load
#: (the request of 1,000 names is of that size).
CALL_TIMEOUT = 600.0


@pytest.fixture
def client(metastore_service: HiveMetastoreService) -> Iterator[Any]:
    assert metastore_service.port is not None
    with metastore_client(metastore_service.host, metastore_service.port) as connection:
        if DATABASE not in connection.get_all_databases():
            location = f"{metastore_service.warehouse.rstrip('/')}/{DATABASE}.db"
            connection.create_database(database(DATABASE, location))
        yield connection


def _stored(client: Any, name: str) -> dict[tuple[str, ...], tuple[str, dict[str, str], int]]:
    """Every partition of the table as the metastore keeps it: location, parameters, creation time."""
    found = client.get_partitions(DATABASE, name, -1)
    return {tuple(p.values): (p.sd.location, dict(p.parameters or {}), p.createTime) for p in found}


def _drawn(
    partitions: list[Partition], catalog: CountingMetastoreCatalog, calls_before: list[int]
) -> Iterator[Partition]:
    """`partitions`, noting for each how many Thrift calls the catalog had made when it was drawn."""
    for partition in partitions:
        calls_before.append(catalog.calls.total())
        yield partition


def test_partitions_register_in_batches_then_again_then_moved(
    metastore_service: HiveMetastoreService, client: Any, tmp_path: Path
) -> None:
    name = f"events_{uuid.uuid4().hex[:8]}"
    table = f"{DATABASE}.{name}"
    location = StorePath.parse((tmp_path / name).as_uri())
    client.create_table(external_parquet_table(DATABASE, name, location.uri()))
    days = [f"d{index:05d}" for index in range(PARTITIONS)]
    partitions = [Partition((("dt", day),), location.join(f"dt={day}")) for day in days]
    catalog = CountingMetastoreCatalog(metastore_service.uri, timeout_seconds=CALL_TIMEOUT, batch_size=BATCH)

    calls_before: list[int] = []
    catalog.register_partitions(table, _drawn(partitions, catalog, calls_before))
    assert catalog.calls == {
        "get_table": 1,
        "get_partitions_by_names": BATCHES,
        "add_partitions_req": BATCHES,
    }
    assert max(catalog.largest.values()) == BATCH
    # Streamed: batch k is drawn (whole) after get_table and the two calls of each batch before it.
    for index, calls in enumerate(calls_before):
        batch = index // BATCH
        assert calls == (1 + 2 * batch if batch else 0), f"partition {index} drawn after {calls} calls"
    registered = _stored(client, name)
    assert sorted(registered) == [(day,) for day in days]
    assert all(same_path(location_path(registered[(p.values[0][1],)][0]), p.location) for p in partitions)

    whole = CountingMetastoreCatalog(metastore_service.uri, timeout_seconds=CALL_TIMEOUT)
    whole.register_partitions(table, iter(partitions))
    assert whole.calls == {"get_table": 1, "get_partitions_by_names": 1}, "nothing to add or move"
    assert whole.largest["get_partitions_by_names"] == REGISTRATION_BATCH
    assert _stored(client, name) == registered, "registering again changes nothing"

    moved = [
        Partition(p.values, location.join("moved", p.location.name)) if index % 10 == 0 else p
        for index, p in enumerate(partitions)
    ]
    catalog.clear()
    catalog.register_partitions(table, iter(moved))
    assert catalog.calls == {"get_table": 1, "get_partitions_by_names": BATCHES, "alter_partitions": BATCHES}
    assert catalog.largest["alter_partitions"] == BATCH // 10
    after = _stored(client, name)
    assert sorted(after) == sorted(registered), "no partition added or dropped"
    for index, partition in enumerate(moved):
        values = (partition.values[0][1],)
        if index % 10 == 0:
            assert same_path(location_path(after[values][0]), partition.location), partition
        else:
            assert after[values] == registered[values], f"{partition} was not moved, so it is as it was"


class _SecondAddFails(HiveMetastoreCatalog):
    """The catalog over a client whose second ``add_partitions_req`` fails as a dropped connection."""

    def _request(self, name: str, action: str | Callable[[], str], call: Callable[[Any], _T]) -> _T:
        return super()._request(name, action, lambda client: call(_FailingClient(client)))


class _FailingClient:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._adds = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def add_partitions_req(self, request: Any) -> Any:
        from thrift.transport.TTransport import TTransportException

        self._adds += 1
        if self._adds == 2:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")
        return self._client.add_partitions_req(request)


def test_a_failure_midway_keeps_the_batches_before_it_and_says_how_many(
    metastore_service: HiveMetastoreService, client: Any, tmp_path: Path
) -> None:
    name = f"events_{uuid.uuid4().hex[:8]}"
    table = f"{DATABASE}.{name}"
    location = StorePath.parse((tmp_path / name).as_uri())
    client.create_table(external_parquet_table(DATABASE, name, location.uri()))
    partitions = [Partition((("dt", f"d{n}"),), location.join(f"dt=d{n}")) for n in range(7)]

    failing = _SecondAddFails(metastore_service.uri, batch_size=3)
    with pytest.raises(CatalogUnreachableError) as raised:
        failing.register_partitions(table, iter(partitions))
    message = str(raised.value)
    assert message.startswith(f"cannot register the partitions of {table} (3 done): metastore ")
    assert "\n" not in message and "TSocket read 0 bytes" in message
    assert sorted(_stored(client, name)) == [("d0",), ("d1",), ("d2",)], "the first batch stays"

    HiveMetastoreCatalog(metastore_service.uri, batch_size=3).register_partitions(table, iter(partitions))
    assert sorted(_stored(client, name)) == [(f"d{n}",) for n in range(7)]

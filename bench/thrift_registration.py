"""The Thrift route of `bench.table_registration`: what ``HiveMetastoreCatalog.register_partitions``
costs per partition on a Thrift metastore, the route the committed data source takes (its driver
side has no SparkSession, so it asks the metastore itself).

The metastore is Hive 2.3's own service (``devtools.hive_metastore.HiveMetastoreService``) kept in
a private PostgreSQL (``devtools.postgres.Postgres``), both started once for the scenario and
always stopped. Each repetition creates a fresh external table over Thrift (``create_table``, as
any metastore client may) over a folder already holding its ``dt=...`` directories, then registers
them all three times: new, again (nothing changes), and with a tenth of them moved to other
folders. The Thrift calls are counted by wrapping the client the catalog hands to its request
(``devtools.metastore_client.CountingMetastoreCatalog``), so the count is whatever the catalog did,
by name, with the most partitions one call carried.

The same-run baseline is what registration did before it was batched: one request of every
partition (``batch_size`` = the partition count), on its own fresh table, its order rotated with
ours; it is given the time that takes (the catalog's default is 60 s per call, which one request of
10,000 partitions overran here). No MSCK REPAIR or ALTER baseline: those run through a Spark
session, and the bench's one session (one per JVM; Spark builds its Hive client once per JVM, from
the conf its first session had) is on an embedded Derby metastore.
"""

from __future__ import annotations

import secrets
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.catalog import REGISTRATION_BATCH, Partition, location_path
from airflow_commit_provider.core.hive_metastore_catalog import thrift_values
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from airflow_commit_provider.devtools.metastore_client import (
    CountingMetastoreCatalog,
    database,
    external_parquet_table,
    metastore_client,
)
from airflow_commit_provider.devtools.postgres import Postgres, PostgresError
from bench.common import BenchEnv, ScenarioResult, log, rotated, timer

METHOD = "ours over Thrift"
BASELINE = "one request of all (before batching)"
DATABASE = "bench_thrift_tables"
#: The registrations of each repetition, in order: all new, all again, a tenth moved.
CASES = ("new", "again", "moved")
#: What one call may take here, for ours and the baseline alike (one request of 10,000 took 409 s).
CALL_TIMEOUT = 1800.0


def measure(env: BenchEnv, result: ScenarioResult, counts: list[int]) -> None:
    """Time and count `register_partitions` for each of `counts` partitions, `env.repeat` times,
    into `result`, against one request of all; without PostgreSQL, a note says the route was
    skipped and why."""
    result.parameters[METHOD] = (
        "HiveMetastoreCatalog.register_partitions (the data source's registration) on Hive 2.3's "
        f"Thrift metastore kept in PostgreSQL, on loopback, in batches of {REGISTRATION_BATCH}"
    )
    result.parameters[f"{METHOD}: cases"] = list(CASES)
    try:
        postgres = Postgres()
    except PostgresError as error:
        result.notes.append(f"{METHOD} skipped: {error}")
        log(f"{METHOD} skipped: {error}")
        return
    root = env.work_dir / "thrift-tables"
    with postgres, _metastore(postgres, root) as service:
        assert service.port is not None
        ours = CountingMetastoreCatalog(service.uri, timeout_seconds=CALL_TIMEOUT)
        with metastore_client(service.host, service.port) as client:
            client.create_database(database(DATABASE, (root / "db").as_uri()))
            # The service's first requests load its classes and fill DataNucleus's caches: one
            # registration, not recorded, so the first count measured is no slower for coming first.
            _register(client, ours, root, 1)
            for count in counts:
                one_request = CountingMetastoreCatalog(
                    service.uri, timeout_seconds=CALL_TIMEOUT, batch_size=count
                )
                catalogs = {METHOD: ours, BASELINE: one_request}
                for turn in range(env.repeat):
                    measured = {
                        method: _register(client, catalogs[method], root, count)
                        for method in rotated(list(catalogs), turn)
                    }
                    _record(result, count, measured)
    result.notes.append(
        f"{METHOD} is register_partitions alone, as the Spark route's ours is; after the commit point "
        "register_table_partitions looks the table up first (table_info: one get_table more)."
    )


def _record(
    result: ScenarioResult,
    count: int,
    measured: dict[str, dict[str, tuple[float, Counter[str], Counter[str]]]],
) -> None:
    """Ours against the baseline per case, our own rows, and the calls by name in the notes."""
    for case in CASES:
        ours, baseline = measured[METHOD][case], measured[BASELINE][case]
        result.comparison(
            f"Thrift registration, {case}: seconds per partition, {count} partitions, against {BASELINE}",
            ours_label=METHOD,
            baseline_label=BASELINE,
            unit="s",
            group="time",
        ).add(ours[0] / count, baseline[0] / count)
        for method in measured:
            seconds, calls, largest = measured[method][case]
            label = f"{method}, {case}, {count} partitions"
            result.measure(f"{label}: seconds", seconds)
            result.measure(f"{label}: seconds per partition", seconds / count)
            result.measure(f"{label}: Thrift calls", calls.total(), "calls")
            result.measure(
                f"{label}: most partitions in one call", max(largest.values(), default=0), "partitions"
            )
            log(f"{label}: {seconds:.3f} s, Thrift calls {dict(calls)}, largest {dict(largest)}")
    for method in measured:
        result.notes.append(
            f"{method}, {count} partitions: Thrift calls by case: "
            + "; ".join(
                f"{case} "
                + ", ".join(f"{name} {number}" for name, number in measured[method][case][1].items())
                for case in CASES
            )
        )


@contextmanager
def _metastore(postgres: Postgres, root: Path) -> Iterator[HiveMetastoreService]:
    """Hive's Thrift metastore in a new database of the started `postgres`, warehouse under `root`."""
    log("starting Hive's Thrift metastore on PostgreSQL")
    database = postgres.create_database(f"bench_metastore_{secrets.token_hex(4)}")
    with (
        timer() as elapsed,
        HiveMetastoreService(
            database.jdbc_url, database.user, database.password, (root / "warehouse").as_uri()
        ) as service,
    ):
        log(f"Thrift metastore ready in {elapsed():.1f} s at {service.uri}")
        yield service


def _register(
    client: Any, catalog: CountingMetastoreCatalog, root: Path, count: int
) -> dict[str, tuple[float, Counter[str], Counter[str]]]:
    """A fresh table over `count` partition folders, registered through `catalog` new, again and
    with a tenth moved: per case, seconds, Thrift calls by name and the most partitions a call of
    each name carried. Fails unless the metastore then lists every partition at its folder."""
    name = f"events_{uuid.uuid4().hex[:12]}"
    table = f"{DATABASE}.{name}"
    location = root / name
    store_location = StorePath.parse(location.as_uri())
    partitions = []
    for index in range(count):
        day = f"2024-01-01-{index:05d}"
        folder = location / f"dt={day}"
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"PAR1")
        partitions.append(Partition((("dt", day),), store_location.join(f"dt={day}")))
    moved = [
        Partition(p.values, store_location.join("moved", p.location.name)) if index % 10 == 0 else p
        for index, p in enumerate(partitions)
    ]
    client.create_table(external_parquet_table(DATABASE, name, location.as_uri()))
    try:
        measured = {}
        for case, wanted in zip(CASES, (partitions, partitions, moved), strict=True):
            catalog.clear()
            with timer() as elapsed:
                catalog.register_partitions(table, wanted)
            measured[case] = (elapsed(), Counter(catalog.calls), Counter(catalog.largest))
            _check(catalog, table, wanted)
        return measured
    finally:
        client.drop_table(DATABASE, name, False)


def _check(catalog: CountingMetastoreCatalog, table: str, partitions: list[Partition]) -> None:
    """The metastore lists exactly `partitions`, each at its location."""
    listed = catalog.partitions(table)
    expected = {thrift_values(partition): partition.location for partition in partitions}
    if set(listed) != set(expected) or not all(
        same_path(location_path(listed[values]), where) for values, where in expected.items()
    ):
        raise RuntimeError(f"{METHOD}: {table} does not list its {len(partitions)} partitions as registered")

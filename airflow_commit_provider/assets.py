"""Airflow assets for committed writes: the destination as an outlet, and the event of a verified commit.

A committed write knows exactly what became visible, so its asset event says so: the job, the
committer, files, bytes, rows and the partitions written. On Airflow 3.3 each partition written is
also the event's partition key (``outlet_events[asset].add_partitions``), so a partition-aware DAG
(:func:`day_partition_schedule`) runs once for each day committed. Airflow 3.1 and 3.2 get one plain
event whose ``extra`` lists the partitions (3.2 has partitioned asset events, but an event's key is
its DAG run's: a task cannot set one), and :func:`day_partition_schedule` is a plain asset schedule.

Every partition key is one asset event, and a task sends all of its events in one call, so a job
that wrote more than `PARTITION_EVENTS` partitions emits one event without keys instead, as on
Airflow 3.1: its ``extra`` lists the first `EXTRA_PARTITIONS`, counts them all
(``partition_count``) and says where they are all listed (``partition_list``).

Asset URIs follow Airflow's conventions: ``s3://bucket/key`` for ``s3://``, ``s3a://`` and
``s3n://`` alike (as the Amazon provider's ``create_asset``), ``file:///path`` for local paths (as
the common IO provider's), percent-encoded where a key holds characters a URI cannot (a space,
``#``, ``?``, ``%``), so the key survives Airflow's URI normalisation.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset

from airflow_commit_provider.core.paths import S3_SCHEMES, StorePath

__all__ = [
    "EXTRA_PARTITIONS",
    "PARTITION_EVENTS",
    "asset_uri",
    "commit_extra",
    "day_partition_schedule",
    "destination_asset",
    "emit_commit_event",
    "partition_keys_supported",
]

log = logging.getLogger(__name__)

#: Partitions listed in an event's ``extra`` (``partition_count`` is always exact): extras are stored
#: in the metadata database with every event.
EXTRA_PARTITIONS = 100
#: The longest partition key Airflow stores (its ``ID_LEN``); a longer one would fail the task.
MAX_PARTITION_KEY = 250
#: Partition keys (asset events) a task gives one asset; past it, one event without keys. Airflow
#: 3.3's task runner sends every event, each with the whole ``extra``, in the task's one success
#: call (``SucceedTask.outlet_events``); the API server writes a row per event and queues the
#: asset's partition-aware DAGs for each, inside that request, which a worker waits
#: ``[workers] execution_api_timeout`` (5 s by default) for before retrying it. Measured with
#: ``dag.test()`` on SQLite (``bench/results/asset_events.json``): the call took 1.7 s at 100
#: events, 12.7 s at 1,000, 121 s at 5,000 and 251 s at 10,000 (41 MB of extras).
PARTITION_EVENTS = 100


class _PartitionsNotEmitted:
    """Remembers that this Airflow was said to have no ``add_partitions``, so it is said once."""

    logged = False


def partition_keys_supported() -> bool:
    """Whether a task can give its asset events partition keys here (``add_partitions``: Airflow 3.3)."""
    try:
        from airflow.sdk.execution_time.context import OutletEventAccessor
    except ImportError:
        return False
    return hasattr(OutletEventAccessor, "add_partitions")


def asset_uri(destination: str | StorePath) -> str:
    """The asset URI of a destination, as Airflow and its S3 and file providers write it."""
    path = StorePath.parse(destination)
    if path.scheme in S3_SCHEMES:
        path = StorePath("s3", path.bucket, path.key)
    return path.uri()


def destination_asset(destination: str | StorePath) -> Asset:
    """The asset a committed write to `destination` updates (named by its URI)."""
    return Asset(uri=asset_uri(destination))


def commit_extra(
    result: Mapping[str, Any],
    partitions: Iterable[str],
    *,
    partition_count: int | None = None,
    partition_list: str | None = None,
) -> dict[str, Any]:
    """The event's ``extra``: what the commit made visible, small enough for every event row.

    `partitions` are the partitions written, in order (the top level, ``""``, is left out); it is
    read as far as the extra lists them unless `partition_count` is not given, when it is counted.
    `partition_list` is where they are all listed, said when the extra lists fewer than all.
    """
    written = (p for p in partitions if p)
    listed = list(itertools.islice(written, EXTRA_PARTITIONS))
    count = partition_count if partition_count is not None else len(listed) + sum(1 for _ in written)
    extra = {
        "job_id": result["job_id"],
        "committer": result["committer"],
        "files": result["files"],
        "bytes": result["bytes"],
        "rows": result["rows"],
        "partitions": listed,
        "partition_count": count,
    }
    if count > len(listed) and partition_list is not None:
        extra["partition_list"] = partition_list
    return extra


def emit_commit_event(
    context: Mapping[str, Any],
    asset: Asset,
    extra: dict[str, Any],
    partitions: Iterable[str],
    partition_count: int | None = None,
) -> None:
    """Attach `extra` to this task's event for `asset`, and each partition written as a partition key.

    A context without ``outlet_events`` (an operator run outside a task) emits nothing. Partition
    keys need Airflow 3.3's ``add_partitions``; before it the event is one plain event (on 3.2 its
    partition key is the DAG run's, if any), and this is logged once per process. A key longer than
    Airflow stores is left out, with a warning. More than `PARTITION_EVENTS` partitions
    (`partition_count`, else as many as `partitions` yields) get no keys: the one event stands for
    them all, and a warning says so (a partition-aware DAG does not run on an event without a key).
    """
    outlet_events = context.get("outlet_events")
    if outlet_events is None:
        return
    event = outlet_events[asset]
    event.extra.update(extra)
    keys = list(itertools.islice((key for key in partitions if key), PARTITION_EVENTS + 1))
    count = partition_count if partition_count is not None else len(keys)
    if count > PARTITION_EVENTS:
        log.warning(
            "%s: %s partitions written, more than the %d a task emits asset events for: one event "
            "without partition keys stands for them all (its extra counts them and says where they "
            "are listed); DAGs scheduled on this asset by partition do not run on it",
            asset.uri,
            f"{count:,}" if partition_count is not None else f"more than {PARTITION_EVENTS:,}",
            PARTITION_EVENTS,
        )
        return
    too_long = [key for key in keys if len(key) > MAX_PARTITION_KEY]
    if too_long:
        log.warning(
            "%s: %d partitions have names longer than the %d characters of an Airflow partition key; "
            "their events carry no key (first: %s)",
            asset.uri,
            len(too_long),
            MAX_PARTITION_KEY,
            too_long[0],
        )
        keys = [key for key in keys if len(key) <= MAX_PARTITION_KEY]
    if not keys:
        return
    add_partitions = getattr(event, "add_partitions", None)
    if add_partitions is None:
        if not _PartitionsNotEmitted.logged:
            _PartitionsNotEmitted.logged = True
            log.info(
                "This Airflow (%s) has no outlet_events[...].add_partitions (Airflow 3.3 adds it): asset "
                "events carry the partitions written in their extra only, not as partition keys",
                _airflow_version(),
            )
        return
    add_partitions(keys)


def day_partition_schedule(asset: Asset, column: str = "dt") -> Any:
    """A schedule on `asset` that runs once for each ``<column>=YYYY-MM-DD`` partition committed.

    On Airflow 3.3 this is a ``PartitionedAssetTimetable`` whose ``StartOfDayMapper`` reads the
    partition key ``dt=2024-01-01`` as the day ``2024-01-01``: the run's ``partition_key``.

    Elsewhere it is the plain asset schedule, and a run finds the days in its triggering events'
    ``extra``: where tasks cannot emit partition keys (Airflow 3.1 and 3.2, see
    :func:`partition_keys_supported`), or where those names are missing or take other arguments
    (they changed between 3.2 and 3.3). Airflow 3.2 has both names, but a partition-aware DAG there
    would never run on these events, which carry no key (the scheduler logs "Listening Dags are
    partition-aware but the run has no partition key" and queues nothing).
    """
    if not partition_keys_supported():
        return [asset]
    try:
        from airflow.sdk import PartitionedAssetTimetable, StartOfDayMapper

        mapper = StartOfDayMapper(input_format=f"{column}=%Y-%m-%d")
        return PartitionedAssetTimetable(assets=asset, default_partition_mapper=mapper)
    except (ImportError, TypeError):
        return [asset]


def _airflow_version() -> str:
    from airflow import __version__

    return __version__

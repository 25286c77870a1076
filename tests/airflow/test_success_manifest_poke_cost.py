"""What one poke of `SuccessManifestSensor` and one check of its trigger cost, counted at the store
(issue 28): one ranged GET of at most 64 KiB for a job of 20,000 files in 2,000 partitions whose
`_SUCCESS` is larger than that, two when a required partition lies past the 100 listed inline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.sdk import PokeReturnValue
from support.counting import CountingStore
from support.success_files import JOB, listed_job, put

from airflow_commit_provider.core.formats.success import SENSOR_READ_BYTES
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.sensors import SuccessManifestSensor
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.triggers import SuccessManifestTrigger

FILES, PARTITIONS = 20_000, 2_000


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> StorePath:
    location = StorePath.parse(str(tmp_path_factory.mktemp("poke") / "table"))
    store = LocalStore()
    put(store, location, listed_job(store, location, FILES, PARTITIONS, name_bytes=1024))
    assert store.get_status(location.join("_SUCCESS")).size > SENSOR_READ_BYTES  # type: ignore[union-attr]
    return location


@pytest.mark.parametrize(
    ("partitions", "requests"),
    [(["dt=00000"], 1), (["dt=00000", "dt=01999"], 2)],
    ids=["inline", "past the cap"],
)
def test_a_poke_costs_one_ranged_get_and_one_more_past_the_inline_partitions(
    table: StorePath, partitions: list[str], requests: int
) -> None:
    counting = CountingStore(LocalStore())
    sensor = SuccessManifestSensor(
        task_id="wait",
        destination=str(table),
        job_id=JOB,
        min_files=FILES,
        required_partitions=partitions,
        poke_interval=0,
    )
    sensor._store = counting  # the hook would open a local store for this path
    result = sensor.poke({})
    assert isinstance(result, PokeReturnValue) and result.is_done
    summary: dict[str, Any] = result.xcom_value  # type: ignore[assignment]
    assert (summary["files"], summary["partition_count"], len(summary["partitions"])) == (
        FILES,
        PARTITIONS,
        100,
    )
    assert counting.calls == {"read_range": requests}
    assert counting.paths_read[table.join("_SUCCESS")] == 1 and counting.largest_read <= SENSOR_READ_BYTES


def test_the_triggers_check_costs_the_same(table: StorePath, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = CountingStore(LocalStore())
    monkeypatch.setattr(SuccessManifestTrigger, "_open_store", lambda self: counting)
    trigger = SuccessManifestTrigger(
        destination=str(table),
        poke_interval=0,
        expectations=SuccessExpectations(job_id=JOB, required_partitions=("dt=01999",)),
    )

    async def first_event() -> Any:
        run = trigger.run()
        try:
            return (await run.__anext__()).payload
        finally:
            await run.aclose()

    event = asyncio.run(first_event())
    assert event["status"] == "success" and event["summary"]["files"] == FILES
    assert counting.calls == {"read_range": 2} and counting.largest_read <= SENSOR_READ_BYTES


def test_the_summary_stays_small(table: StorePath) -> None:
    """What the sensor pushes to XCom: counts and the first partitions, never a list that grows."""
    found = SuccessExpectations(job_id=JOB).check(LocalStore(), table)
    summary = found.xcom_summary()
    assert summary is not None and len(repr(summary)) < 4096

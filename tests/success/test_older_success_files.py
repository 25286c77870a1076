"""Our readers still read the files of ours from before the file list (issue 28, compatibility):
the success check, `success verify --files` and the report, on files recorded from a real commit
(tests/data/older_success), with their destination put back in, on both stores."""

from __future__ import annotations

from pathlib import Path

from support.counting import CountingStore
from support.success_files import listed_job, put

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.report.commit_report import load_commit
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.success.listed_files import check_listed_files

RECORDED = Path(__file__).parents[1] / "data" / "older_success"
JOB = "recorded-job-0001"
PARTITION = "dt=2024-01-02"


def install(store: Store, destination: StorePath) -> SuccessData:
    """The recorded files under `destination`, and the data files the `_SUCCESS` lists (of their
    sizes); the table's `_SUCCESS`, parsed."""
    layout = JobLayout(destination, JOB)
    for name, path in (
        ("table._SUCCESS.json", layout.success_marker),
        ("partition._SUCCESS.json", layout.partition_success(PARTITION)),
        ("record.success.json", layout.job_record),
        ("outcome.json", layout.outcome),
    ):
        text = (RECORDED / name).read_text(encoding="utf-8").replace("{destination}", destination.uri())
        store.write_bytes(path, text.encode())
    table = SuccessData.from_bytes(store.read_bytes(layout.success_marker), "_SUCCESS")
    for committed in table.files or ():
        store.write_bytes(StorePath.from_uri(committed.uri), b"x" * committed.size)
    return table


def test_the_recorded_files_are_of_the_older_format() -> None:
    table = SuccessData.from_bytes((RECORDED / "table._SUCCESS.json").read_bytes(), "recorded")
    record = SuccessData.from_bytes((RECORDED / "record.success.json").read_bytes(), "recorded")
    assert table.files is not None and len(table.files) == 3 and table.file_list is None
    assert table.partition_count is None and record.files is None and record.file_list is None
    assert record.partition_stats is not None and len(record.partition_stats) == 2


def test_the_success_check_reads_them_as_before(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    destination = root.join("events")
    install(store, destination)
    counting = CountingStore(store)
    expectations = SuccessExpectations(
        job_id=JOB, committers=("partitioned",), min_files=3, required_partitions=("dt=2024-01-01", PARTITION)
    )
    found = expectations.check(counting, destination)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 1}, "smaller than 64 KiB: read whole in one request"
    assert found.xcom_summary()["partition_count"] == 2  # type: ignore[index]

    marker = SuccessExpectations(job_id=JOB, min_files=2).check(store, destination.join(PARTITION))
    assert marker.state == "accepted" and marker.data is not None and marker.data.partitions == [PARTITION]

    put(store, destination, listed_job(store, destination, 10, 1, job_id="a-later-job"))
    by_record = expectations.check(store, destination)
    assert by_record.state == "accepted" and by_record.from_record, by_record.describe()
    missing = SuccessExpectations(job_id=JOB, required_partitions=("dt=2024-01-03",)).check(
        store, destination
    )
    assert missing.reasons == ("missing partitions: dt=2024-01-03",)


def test_verify_files_and_the_report_read_their_inline_files(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    destination = root.join("events")
    table = install(store, destination)
    check = check_listed_files(store, table, destination, source="_SUCCESS")
    assert (check.ok, check.listed, check.unlisted) == (True, 3, 0)
    partition = destination.join(PARTITION)
    marker = SuccessData.from_bytes(store.read_bytes(partition.join("_SUCCESS")), "marker")
    assert check_listed_files(store, marker, partition, source="marker").listed == 2

    report = load_commit(store, destination, JOB)
    assert report.summary.state == "committed" and report.listed_files == 3 and report.pages == 1
    assert [(f.uri, f.size) for f in report.files_page] == [(f.uri, f.size) for f in table.files or ()]
    assert [(p.partition, p.files) for p in report.partitions] == [("dt=2024-01-01", 1), (PARTITION, 2)]
    assert len(report.tasks) == 2 and report.phases

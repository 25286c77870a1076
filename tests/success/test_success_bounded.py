"""`_SUCCESS` and the job record of bounded size (`docs/bounded-commits.md`), and their readers.

- Size: a record of a job that wrote a million files with 1 KiB paths and 10,000 partitions is the
  size of one that wrote a thousand, and everything a check needs (fields 1-5) lies in its first
  `SENSOR_READ_BYTES`: `read_head` gets it in one ranged GET, on the local store and the embedded S3.
- Order and caps: fields in the contract's order; partitions and registered partitions inline up to
  `PARTITIONS_LIMIT` names and `PARTITIONS_INLINE_BYTES`; lost attempts bounded in all.
- Compatibility: ours round-trip; older files (every file inline, every partition inline,
  `registeredPartitions` without a count, `partitionStats` for all) still parse and read as before;
  Hadoop's too, read whole when large.
- A prefix cut anywhere gives fewer fields, never a different value.
- The lists behind it: all files and all partitions, from inline or from the lists, for the table's
  `_SUCCESS` and for a partition marker; a list naming files outside its table is refused.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from airflow_commit_provider.core.formats.attempts import FAILED, LostAttempt
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    FileListEntry,
    ListRef,
    file_order_key,
    partition_order_key,
    write_file_list,
    write_partition_list,
)
from airflow_commit_provider.core.formats.json_prefix import FilePrefix, parse_prefix
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.formats.phases import CommitPhase
from airflow_commit_provider.core.formats.success import (
    FILENAMES_LIMIT,
    LOST_ATTEMPTS_LIMIT,
    OTHER_TASKS,
    PARTITIONS_INLINE_BYTES,
    PARTITIONS_LIMIT,
    SENSOR_READ_BYTES,
    InlinePartitions,
    LegacySuccessMarkerError,
    SuccessData,
    inline_partitions,
)
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store

StoreRoot = tuple[Store, StorePath]

#: The contract's field order (docs/bounded-commits.md), by group.
FIELD_ORDER = [
    [
        "name",
        "jobId",
        "jobIdSource",
        "committer",
        "timestamp",
        "date",
        "hostname",
        "success",
        "state",
        "description",
    ],
    ["fileCount", "totalBytes", "rows"],
    ["table", "registeredPartitionCount", "registeredPartitions"],
    ["partitionCount", "partitions", "partitionList"],
    ["fileList"],
    ["filenames"],
    ["metrics", "diagnostics", "iostatistics"],
    ["phases", "partitionStats", "lostAttempts", "lostAttemptsLeftOut"],
]
CHECK_FIELDS = {name for group in FIELD_ORDER[:5] for name in group}
FAKE_SHA = "ab" * 32
FILE_LIST = ListRef(f"_airflow_commit/job-1/files-{FAKE_SHA}.parquet", FAKE_SHA, 123_456_789, 1_000_000)
PARTITION_LIST = ListRef(f"_airflow_commit/job-1/partitions-{FAKE_SHA}.parquet", FAKE_SHA, 98_765, 10_000)


def long_path(index: int) -> str:
    """A 1 KiB-long committed file URI."""
    head = f"s3://bucket/warehouse/table/dt={index % 10_000:05d}/part-{index:09d}-"
    return head + "x" * (1024 - len(head) - 8) + ".parquet"


def partition_names(count: int) -> Iterator[str]:
    return (f"dt={index:05d}/region=europe-west-{index % 7}" for index in range(count))


def record_of(files: int, partitions: int) -> SuccessData:
    """The record of a job that wrote `files` files (1 KiB paths) in `partitions` partitions, built
    as job commit builds it: streamed caps, references to its lists, every lost attempt it found."""
    inline = InlinePartitions()
    for name in partition_names(partitions):
        inline.add(name)
    lost = [
        LostAttempt(f"task_job-1_m_{task:06d}", f"attempt_job-1_m_{task:06d}_{attempt}", FAILED, 1000, 2000)
        for task in range(partitions)
        for attempt in range(1, 3)
    ]
    return SuccessData(
        committer="magic",
        job_id="job-1",
        description="airflow-commit-provider magic committer",
        diagnostics={"stage": "committer_commit_job"},
        metrics={"m": 1},
        filenames=[long_path(index) for index in range(FILENAMES_LIMIT)],
        iostatistics=IOStatistics(counters={"op_put": files, "committer_files_committed": files}),
        partitions=inline.names,
        partition_count=inline.count,
        partition_list=None if inline.complete else PARTITION_LIST,
        file_count=files,
        total_bytes=files * 1000,
        rows=files * 10,
        file_list=dataclasses.replace(FILE_LIST, entries=files),
        table="db.events",
        registered_partitions=list(partition_names(partitions)),
        phases=[CommitPhase("write _SUCCESS", 1, 2)],
        partition_stats={name: PartitionStats(100, 1000, 10) for name in partition_names(partitions)},
        lost_attempts=lost,
    )


def test_a_million_files_and_ten_thousand_partitions_keep_the_record_small_and_checks_first() -> None:
    small, large = record_of(1000, 10).to_bytes(), record_of(1_000_000, 10_000).to_bytes()
    assert len(large) < len(small) + 64 * 1024, f"{len(small):,} bytes at 1k files, {len(large):,} at 1M"
    assert len(large) < 256 * 1024
    full = json.loads(large)
    assert len(full["partitions"]) == PARTITIONS_LIMIT and full["partitionCount"] == 10_000
    assert (
        len(full["registeredPartitions"]) == PARTITIONS_LIMIT and full["registeredPartitionCount"] == 10_000
    )
    assert set(full["partitionStats"]) == set(full["partitions"]), (
        "stats inline for the inline partitions only"
    )
    assert len(full["lostAttempts"]) == LOST_ATTEMPTS_LIMIT

    head = SuccessData.from_prefix(FilePrefix(large[:SENSOR_READ_BYTES], whole=False), "s3://b/t/_SUCCESS")
    assert head.read_fields is not None and head.read_fields >= CHECK_FIELDS
    whole = SuccessData.from_bytes(large, "s3://b/t/_SUCCESS")
    for attribute in (
        "job_id", "committer", "timestamp", "success", "state", "file_count", "total_bytes", "rows",
        "table", "registered_partition_count", "registered_partitions", "partition_count",
        "partitions", "partition_list", "file_list",
    ):  # fmt: skip
        assert getattr(head, attribute) == getattr(whole, attribute), attribute
    assert not head.registration_pending and head.committed_file_count() == (1_000_000, True)


def test_fields_are_written_in_the_contracts_order() -> None:
    written = list(json.loads(record_of(5000, 500).to_bytes()))  # one with every field
    assert written == [name for group in FIELD_ORDER for name in group]


def test_inline_partitions_keep_the_first_within_both_caps() -> None:
    short = list(partition_names(150))
    assert inline_partitions(short) == short[:PARTITIONS_LIMIT]
    long_names = [f"dt={index:04d}/" + "é" * 400 for index in range(60)]
    kept = inline_partitions(long_names)
    assert kept == long_names[: len(kept)] and 0 < len(kept) < 60
    assert len(json.dumps(kept, ensure_ascii=False).encode()) <= PARTITIONS_INLINE_BYTES
    tally = InlinePartitions()
    for name in ["a", "b" * (PARTITIONS_INLINE_BYTES), "c"]:
        tally.add(name)
    assert (tally.names, tally.count, tally.complete) == (["a"], 3, False), "a prefix, never one skipped"


def test_lost_attempts_are_bounded_in_all() -> None:
    record = record_of(100, 10_000)  # 20,000 lost attempts of 10,000 tasks
    written = json.loads(record.to_bytes())
    listed, left_out = written["lostAttempts"], written["lostAttemptsLeftOut"]
    assert len(listed) == LOST_ATTEMPTS_LIMIT and len(left_out) <= LOST_ATTEMPTS_LIMIT
    assert OTHER_TASKS in left_out
    assert len(listed) + sum(left_out.values()) == 20_000, "every attempt listed or counted"
    parsed = SuccessData.from_bytes(record.to_bytes(), "record")
    assert parsed.lost_attempts == record.lost_attempts[:LOST_ATTEMPTS_LIMIT]


def test_an_incomplete_inline_list_without_its_partition_list_is_refused() -> None:
    record = dataclasses.replace(record_of(100, 500), partition_list=None)
    with pytest.raises(ValueError, match="needs the partition list"):
        record.to_bytes()
    forged = json.loads(record_of(100, 500).to_bytes())
    del forged["partitionList"]
    with pytest.raises(
        InvalidCommitDataError, match=r"^s3://b/t/_SUCCESS: lists \d+ of 500 partitions and no"
    ):
        SuccessData.from_bytes(json.dumps(forged).encode(), "s3://b/t/_SUCCESS")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"partitionCount": 1}, "field 'partitionCount' is 1, fewer than the"),
        ({"partitionCount": -1}, "field 'partitionCount' is not a count"),
        ({"fileCount": True}, "field 'fileCount' is not a count"),
        ({"registeredPartitionCount": 0}, "field 'registeredPartitionCount' is 0, fewer than"),
        (
            {"fileList": {"path": "../x", "sha256": FAKE_SHA, "bytes": 1, "entries": 1}},
            "field 'fileList': path",
        ),
        ({"partitionList": []}, "field 'partitionList' is not a list reference"),
        ({"partitions": [1, 2]}, "field 'partitions' must list partition paths"),
    ],
)
def test_bad_counts_and_references_are_refused_naming_the_file(change: dict[str, object], words: str) -> None:
    written = json.loads(record_of(100, 20).to_bytes())
    written.update(change)
    with pytest.raises(InvalidCommitDataError, match=words) as caught:
        SuccessData.from_bytes(json.dumps(written).encode(), "s3://b/t/_SUCCESS")
    assert str(caught.value).startswith("s3://b/t/_SUCCESS: ")


def test_ours_round_trip() -> None:
    for record in (record_of(1_000_000, 10_000), record_of(3, 2)):
        parsed = SuccessData.from_bytes(record.to_bytes(), "record")
        expected = dataclasses.replace(
            record,
            registered_partitions=inline_partitions(record.registered_partitions or []),
            registered_partition_count=len(record.registered_partitions or []),
            partition_stats={name: record.partition_stats[name] for name in record.partitions}
            if record.partition_stats
            else None,
            lost_attempts=(record.lost_attempts or [])[:LOST_ATTEMPTS_LIMIT],
            lost_attempts_left_out=parsed.lost_attempts_left_out,
        )
        assert parsed == expected
        assert SuccessData.from_bytes(parsed.to_bytes(), "again").to_bytes() == parsed.to_bytes()


OLD_RECORD = {
    "name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1",
    "timestamp": 1_700_000_000_000,
    "date": "2023-11-14T22:13:20+00:00",
    "hostname": "driver",
    "committer": "partitioned",
    "description": "airflow-commit-provider partitioned committer",
    "jobId": "old-job",
    "jobIdSource": "airflow_commit.job_id",
    "success": True,
    "state": "committed",
    "metrics": {},
    "diagnostics": {},
    "filenames": [],
    "iostatistics": {"counters": {}, "gauges": {}, "minimums": {}, "maximums": {}, "meanstatistics": {}},
    "partitions": [f"dt={day:03d}" for day in range(300)],
    "fileCount": 2000,
    "totalBytes": 2000 * 7,
    "rows": 4000,
    "table": "db.old",
    "registeredPartitions": [f"dt={day:03d}" for day in range(300)],
    "partitionStats": {f"dt={day:03d}": {"files": 1, "bytes": 7} for day in range(300)},
    "files": [
        {"path": f"s3://bucket/t/dt={i % 300:03d}/part-{i:05d}.parquet", "size": 7} for i in range(2000)
    ],
}


def test_older_records_read_as_before(local_root: StorePath) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    data = json.dumps(OLD_RECORD).encode()
    old = SuccessData.from_bytes(data, "old")
    assert old.partition_count is None and old.partitions_complete and old.total_partitions == 300
    assert old.registered_partition_count is None and not old.registration_pending
    assert old.file_list is None and old.lists_all_files and old.committed_file_count() == (2000, True)
    assert len(old.partition_stats or {}) == 300
    directory = StorePath("s3", "bucket", "t")
    store = LocalStore()  # never asked: everything is inline
    assert [f.uri for f in old.iter_all_files(store, directory)] == [e["path"] for e in OLD_RECORD["files"]]
    assert list(old.iter_all_partitions(store, directory)) == OLD_RECORD["partitions"]
    assert len(list(old.iter_partition_stats(store, directory))) == 300
    assert old.summary()["partition_count"] == 300
    rewritten = json.loads(old.to_bytes())  # e.g. a catalog registration saving it again
    assert rewritten["partitionCount"] == 300 and rewritten["registeredPartitionCount"] == 300
    assert len(rewritten["files"]) == 2000 and len(rewritten["partitions"]) == 300


def test_read_head_reads_ours_in_one_ranged_get_and_older_ones_whole(store_root: StoreRoot) -> None:
    store, root = store_root
    ours, old = root.join("ours", "_SUCCESS"), root.join("old", "_SUCCESS")
    store.write_bytes(ours, record_of(1_000_000, 10_000).to_bytes())
    store.write_bytes(old, json.dumps(OLD_RECORD).encode())
    assert store.get_status(ours).size > SENSOR_READ_BYTES < store.get_status(old).size  # type: ignore[union-attr]

    gets = store.statistics.snapshot().get("op_get", 0)
    head = SuccessData.read_head(store, ours)
    assert store.statistics.snapshot()["op_get"] - gets == 1, "one ranged GET of the first 64 KiB"
    assert head.read_fields is not None and "fileList" in head.read_fields and head.file_count == 1_000_000

    gets = store.statistics.snapshot()["op_get"]
    whole = SuccessData.read_head(store, old)
    assert store.statistics.snapshot()["op_get"] - gets == 2, "the head, then the whole older file"
    assert whole.read_fields is None and len(whole.files or ()) == 2000

    small = root.join("small", "_SUCCESS")
    store.write_bytes(small, dataclasses.replace(record_of(3, 2), filenames=[long_path(0)]).to_bytes())
    assert SuccessData.read_head(store, small).read_fields is None
    store.write_bytes(root.join("empty", "_SUCCESS"), b"")
    with pytest.raises(LegacySuccessMarkerError):
        SuccessData.read_head(store, root.join("empty", "_SUCCESS"))
    with pytest.raises(FileNotFoundInStoreError):
        SuccessData.read_head(store, root.join("missing", "_SUCCESS"))


def test_a_large_hadoop_success_is_read_whole(local_root: StorePath) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    hadoop = {
        "name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1",
        "timestamp": 1_700_000_000_000,
        "committer": "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
        "jobId": "hadoop-job",
        "filenames": [long_path(index) for index in range(100)],
        "iostatistics": {"counters": {"committer_files_committed": 12_345}},
        "success": True,
    }
    path = local_root.join("t", "_SUCCESS")
    store.write_bytes(path, json.dumps(hadoop).encode())
    read = SuccessData.read_head(store, path)
    assert read.read_fields is None and read.committed_file_count() == (12_345, True)
    assert len(read.filenames) == 100


def cuts(data: bytes) -> list[int]:
    """Where to cut: around every top-level member's end (inside a number, a name, the separator)
    and every 101st byte besides."""
    members, depth, in_string, escaped = [], 0, False, False
    for index, byte in enumerate(data):
        if in_string:
            in_string, escaped = (escaped or byte != ord('"')), (not escaped and byte == ord("\\"))
        elif byte == ord('"'):
            in_string = True
        elif byte in b"[{":
            depth += 1
        elif byte in b"]}":
            depth -= 1
        elif byte == ord(",") and depth == 1:
            members.append(index)
    around = {at + shift for at in members for shift in range(-4, 5)}
    return sorted({*around, *range(0, len(data), 101), len(data) - 1, len(data)} & set(range(len(data) + 1)))


def test_a_prefix_cut_anywhere_gives_fewer_fields_never_other_values() -> None:
    data = record_of(2_000, 150).to_bytes()
    full = json.loads(data)
    previous: set[str] = set()
    for cut in cuts(data):
        try:
            parsed = parse_prefix(FilePrefix(data[:cut], whole=False), "t/_SUCCESS")
        except InvalidCommitDataError as error:
            pytest.fail(f"a cut at {cut} was refused: {error}")
        members = parsed.members
        assert all(full[name] == value for name, value in members.items()), f"cut at {cut}"
        assert previous <= set(members), "a longer prefix never loses a field"
        previous = set(members)
        if "name" in members:
            head = SuccessData.from_prefix(FilePrefix(data[:cut], whole=False), "t/_SUCCESS")
            assert head.read_fields == (None if parsed.complete else set(members))
            assert head.file_count == (full["fileCount"] if "fileCount" in members else None)
    assert previous == set(full)


def write_lists(
    store: Store, destination: StorePath, job_id: str, names: list[str]
) -> tuple[ListRef, ListRef]:
    layout = JobLayout(destination, job_id)
    entries = sorted(
        (FileListEntry(destination.join(name).uri(), 3, name.rpartition("/")[0]) for name in names),
        key=lambda entry: file_order_key(entry.uri),
    )
    partitions = sorted({entry.partition for entry in entries if entry.partition}, key=partition_order_key)
    stats = [
        (name, PartitionStats(sum(1 for e in entries if e.partition == name), 3, None)) for name in partitions
    ]
    return write_file_list(store, layout, entries), write_partition_list(store, layout, stats)


def test_all_files_and_partitions_from_the_lists_for_the_table_and_a_partition_marker(
    store_root: StoreRoot,
) -> None:
    store, root = store_root
    destination = root.join("table")
    names = [f"dt={day:03d}/part-{i}.parquet" for day in range(150) for i in range(2)] + ["top.parquet"]
    file_list, partition_list = write_lists(store, destination, "job-1", names)
    inline = InlinePartitions()
    for _, partition in sorted(
        (partition_order_key(p), p) for p in {n.rpartition("/")[0] for n in names} - {""}
    ):
        inline.add(partition)
    table = SuccessData(
        "magic",
        "job-1",
        partitions=inline.names,
        partition_count=inline.count,
        partition_list=partition_list,
        file_list=file_list,
        file_count=len(names),
    )
    store.write_bytes(destination.join("_SUCCESS"), table.to_bytes())
    read = SuccessData.read_head(store, destination.join("_SUCCESS"))
    assert not read.partitions_complete and read.list_root(destination) == destination
    assert sorted(f.uri for f in read.iter_all_files(store, destination)) == sorted(
        destination.join(name).uri() for name in names
    )
    assert len(list(read.iter_all_partitions(store, destination))) == 150
    assert dict(read.iter_partition_stats(store, destination))["dt=007"] == PartitionStats(2, 3, None)

    marker_dir = destination.join("dt=007")
    marker = SuccessData("magic", "job-1", partitions=["dt=007"], file_list=file_list, file_count=2)
    store.write_bytes(marker_dir.join("_SUCCESS"), marker.to_bytes())
    read_marker = SuccessData.read_head(store, marker_dir.join("_SUCCESS"))
    assert read_marker.list_root(marker_dir) == destination
    assert [f.uri for f in read_marker.iter_all_files(store, marker_dir)] == [
        destination.join(f"dt=007/part-{i}.parquet").uri() for i in range(2)
    ]

    one_partition = SuccessData("magic", "job-1", partitions=["dt=007"], file_list=file_list)
    assert one_partition.list_root(destination) == destination, (
        "the table's own _SUCCESS of a one-partition job"
    )


def test_a_list_naming_files_outside_its_table_is_refused(store_root: StoreRoot) -> None:
    store, root = store_root
    destination = root.join("dataset1")
    layout = JobLayout(destination, "job-1")
    outside = sorted(
        [root.join("dataset10", "a.parquet").uri(), destination.join("b.parquet").uri()], key=file_order_key
    )
    ref = write_file_list(store, layout, [FileListEntry(uri, 1) for uri in outside])
    success = SuccessData("magic", "job-1", file_list=ref)
    with pytest.raises(
        InvalidCommitDataError, match=r"its file list names .*dataset10/a.parquet.*, which is outside"
    ):
        list(success.iter_all_files(store, destination, "dataset1/_SUCCESS"))
    with pytest.raises(InvalidCommitDataError, match="lists no files"):
        list(SuccessData("x", "y").iter_all_files(store, destination))


def test_the_outcome_carries_the_list_references() -> None:
    result = TaskCommitResult("task_job-1_m_000000", "attempt_job-1_m_000000_0", "file:///m", 1, 3, 3)
    outcome = JobOutcome(
        "job-1", "commit", "magic", (result,), file_list=FILE_LIST, partition_list=PARTITION_LIST
    )
    parsed = JobOutcome.from_bytes(outcome.to_bytes(), "outcome", "job-1")
    assert (parsed.file_list, parsed.partition_list) == (FILE_LIST, PARTITION_LIST)
    older = json.loads(outcome.to_bytes())
    del older["fileList"], older["partitionList"]
    parsed_older = JobOutcome.from_bytes(json.dumps(older).encode(), "outcome", "job-1")
    assert parsed_older.file_list is None and parsed_older.partition_list is None
    older["fileList"] = {"path": "x.parquet", "sha256": FAKE_SHA, "bytes": 1, "entries": 1}
    with pytest.raises(
        InvalidCommitDataError, match=r"^s3://b/t/o\.json: field 'fileList': path 'x\.parquet'"
    ):
        JobOutcome.from_bytes(json.dumps(older).encode(), "s3://b/t/o.json", "job-1")


def test_ours_without_inline_files_is_not_taken_for_hadoops() -> None:
    """Hadoop's `_SUCCESS` lists no partitions, so the check derives them from its `filenames`; ours
    say theirs, and name every file in a list now rather than inline."""
    from airflow_commit_provider.success.check import SuccessExpectations, with_hadoop_partitions

    table = StorePath.parse("s3://bucket/t")
    ours = SuccessData(
        "magic", "j", filenames=[table.join("dt=1", "a").uri()], file_list=FILE_LIST, file_count=1
    )
    assert with_hadoop_partitions(ours, table).partitions == []
    hadoops = dataclasses.replace(ours, file_list=None, file_count=None)
    assert with_hadoop_partitions(hadoops, table).partitions == ["dt=1"]
    reasons = SuccessExpectations(required_partitions=("dt=2",)).verify(ours)
    assert reasons == ["missing partitions: dt=2"], "no note that Hadoop lists only 100 files"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'["name", 1]', "expected a JSON object, found '\\['"),
        (b'{"name": 1, "name": 2, "x"', "member 'name' appears twice"),
        (b'{"a": ' + b"[" * 70 + b"]" * 70 + b', "b"', "nested deeper than 64 levels"),
        (b'{"name": "\xff\xfe", "x"', "not valid UTF-8"),
        (b'{"n": 1' + b"0" * 5000 + b', "x"', "not valid JSON"),
        (b'{1: 2, "x"', None),  # a member name that is no string: nothing complete yet
    ],
)
def test_a_hostile_prefix_is_refused_naming_the_file(data: bytes, words: str | None) -> None:
    if words is None:
        assert parse_prefix(FilePrefix(data, whole=False), "s3://b/t/_SUCCESS").members == {}
        return
    with pytest.raises(InvalidCommitDataError, match=words) as caught:
        parse_prefix(FilePrefix(data, whole=False), "s3://b/t/_SUCCESS")
    assert str(caught.value).startswith("s3://b/t/_SUCCESS: ") and "\n" not in str(caught.value)

"""The job-commit entry spool: sorted by destination key at any size, duplicates found adjacent,
every pass independent, and no file left behind; the partition walk over it."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import SortedSpool, grouped, join_sorted, key_order, spooled
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.partitions import PartitionRows, tally_partitions

ROOT = StorePath("s3", "b", "out")


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The spool's temp directory, watched."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _entries(count: int) -> list[CommitEntry]:
    return [
        CommitEntry(
            dest=ROOT.join(f"dt=2024-01-0{i % 3}", f"part-{i:05d} é\n.parquet").uri(),
            size=i,
            task_id=f"task_{i // 7}",
            upload_id=f"up/{i}+=",
            etags=(f'"etag-{i}"', f'"second-{i}"')[: 1 + i % 2],
        )
        for i in range(count)
    ]


def _spool(entries: list[CommitEntry], run_bytes: int) -> EntrySpool:
    spool = EntrySpool(ROOT, run_bytes=run_bytes)
    for entry in entries:
        spool.append(entry, StorePath.from_uri(entry.dest))
    spool.sort(lambda first, second: ValueError(f"{first.task_id} and {second.task_id}: {first.dest}"))
    return spool


def _key(entry: CommitEntry) -> bytes:
    return key_order(StorePath.from_uri(entry.dest).key)


@pytest.mark.parametrize("run_bytes", [1, 5_000, 1 << 30], ids=["a-run-per-entry", "small-runs", "in-memory"])
def test_every_entry_comes_back_sorted_by_key_on_every_pass(temp_dir: Path, run_bytes: int) -> None:
    entries = _entries(250)
    random.Random(7).shuffle(entries)
    with _spool(entries, run_bytes) as spool:
        expected = sorted(entries, key=_key)
        assert list(spool) == expected
        outer = iter(spool)
        head = [next(outer) for _ in range(100)]
        assert list(spool) == expected  # a second pass meanwhile does not move the first one
        assert head + list(outer) == expected
        assert spool.count == 250
        assert spool.total_bytes == sum(range(250))
        assert spool.uploads == 250


def test_key_order_is_the_order_s3_lists_keys_in() -> None:
    """UTF-8 bytes: `a-b` and `a.txt` before `a/x` (a directory sorts as its name and a slash), and
    a percent-encoded URI sorts by its key, not its encoding."""
    keys = ["out/a/x", "out/a-b", "out/a.txt", "out/a b", "out/é", "out/\u4e00", "out/\ue000", "out/a0"]
    entries = [CommitEntry(ROOT.join(key.removeprefix("out/")).uri(), 1, "t") for key in keys]
    with _spool(entries, 1) as spool:
        got = [StorePath.from_uri(entry.dest).key for entry in spool]
    assert got == sorted(keys, key=lambda key: key.encode("utf-8"))
    assert got[:5] == ["out/a b", "out/a-b", "out/a.txt", "out/a/x", "out/a0"]


@pytest.mark.parametrize("run_bytes", [1, 1 << 30], ids=["spilled", "in-memory"])
def test_duplicate_destinations_meet_in_the_sort_and_name_both_tasks(temp_dir: Path, run_bytes: int) -> None:
    entries = _entries(40)
    twin = CommitEntry(entries[3].dest, 9, "task_other", upload_id="another")
    with pytest.raises(ValueError, match=r"task_0 and task_other: s3://b/out/dt=2024-01-00/part-00003"):
        _spool([*entries, twin], run_bytes)


def test_a_spilled_spool_leaves_no_file_even_before_it_is_closed(temp_dir: Path) -> None:
    spool = _spool(_entries(50), 1)
    assert spool.count == 50
    assert list(temp_dir.iterdir()) == []  # a driver killed now leaves nothing to clean up
    spool.close()
    assert list(temp_dir.iterdir()) == []


def test_records_with_one_key_are_combined_across_runs(temp_dir: Path) -> None:
    spool = SortedSpool(run_bytes=1)
    for key, rows in [(b"b", 1), (b"a", 2), (b"b", 3), (b"c", 4), (b"a", 5)]:
        spool.add((key, rows), 1)
    spool.sort(lambda first, second: (first[0], first[1] + second[1]))
    assert list(spool) == [(b"a", 7), (b"b", 4), (b"c", 4)]
    assert spool.count == 3
    spool.close()


def test_join_pairs_sorted_streams_and_groups_repeated_keys() -> None:
    with spooled([(b"c", "u3"), (b"a", "u1"), (b"c", "u2")], prefix="t") as listed:
        joined = list(join_sorted([(b"a", 1), (b"b", 2)], grouped(listed)))
    assert joined == [
        ((b"a", 1), (b"a", [(b"a", "u1")])),
        ((b"b", 2), None),
        (None, (b"c", [(b"c", "u3"), (b"c", "u2")])),
    ]


def test_the_walk_visits_nested_and_interleaved_partitions_once_each(temp_dir: Path) -> None:
    """Sorted keys interleave a partition's files with a sub-partition's (`a/b/...` between `a/f`
    and `a/z`) and with a sibling that sorts below '/' (`a-c`): each partition is still reported
    once, with all its files, rows looked up as it opens."""
    names = ["a/f", "a/b/x", "a/b/y", "a/z", "a-c/f", "top", "a=1/p/q", "a=10/p/q"]
    entries = [CommitEntry(ROOT.join(name).uri(), len(name), "t") for name in names]
    rows = PartitionRows()
    rows.add_task({"a": 1, "a/b": 2, "a-c": 3, "gone": 9})
    rows.add_task({"a": 10, "a=1/p": 4})
    rows.sort()
    with _spool(entries, 1) as spool:
        tallies = {t.name: (t.files, t.size, t.rows, t.filenames) for t in tally_partitions(spool, rows, 1)}
    rows.close()
    assert tallies == {
        "a": (2, 6, 11, [ROOT.join("a/f").uri()]),
        "a/b": (2, 10, 2, [ROOT.join("a/b/x").uri()]),
        "a-c": (1, 5, 3, [ROOT.join("a-c/f").uri()]),
        "a=1/p": (1, 7, 4, [ROOT.join("a=1/p/q").uri()]),
        "a=10/p": (1, 8, 0, [ROOT.join("a=10/p/q").uri()]),
    }


def test_rows_are_unknown_when_a_task_did_not_count_them() -> None:
    rows = PartitionRows()
    rows.add_task({"a": 1})
    rows.add_task(None)
    rows.add_task({"a": 2})
    rows.sort()
    assert rows.cursor() is None
    with _spool([CommitEntry(ROOT.join("a/f").uri(), 1, "t")], 1) as spool:
        assert [t.rows for t in tally_partitions(spool, rows)] == [None]

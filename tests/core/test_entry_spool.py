"""The job-commit entry spool: entries in order past its memory limit, and no file left behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The spool's temp directory, watched."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _entries(count: int) -> list[CommitEntry]:
    return [
        CommitEntry(
            dest=f"s3://b/out/dt=2024-01-0{i % 3}/part-{i:05d} é\n.parquet",
            size=i,
            task_id=f"task_{i // 7}",
            upload_id=f"up/{i}+=",
            etags=(f'"etag-{i}"', f'"second-{i}"')[: 1 + i % 2],
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("memory_entries", [0, 5, 1_000])
def test_every_entry_comes_back_in_order_on_every_pass(temp_dir: Path, memory_entries: int) -> None:
    entries = _entries(250)
    with EntrySpool(memory_entries=memory_entries) as spool:
        for entry in entries:
            spool.append(entry, entry.dest.rsplit("/", 1)[0])
        assert list(spool) == entries
        outer = iter(spool)
        head = [next(outer) for _ in range(100)]
        assert list(spool) == entries  # a second pass meanwhile does not move the first one
        assert head + list(outer) == entries
        assert spool.count == 250
        assert spool.total_bytes == sum(range(250))
        assert len(spool.partitions) == 3


def test_a_spilled_spool_leaves_no_file_even_before_it_is_closed(temp_dir: Path) -> None:
    spool = EntrySpool(memory_entries=1)
    for entry in _entries(50):
        spool.append(entry, "")
    assert spool._spill is not None
    assert list(temp_dir.iterdir()) == []  # a driver killed now leaves nothing to clean up
    spool.close()
    assert list(spool) == []


def test_duplicate_destinations_are_found_past_the_memory_limit(temp_dir: Path) -> None:
    spool = EntrySpool(memory_entries=2)
    for entry in _entries(10):
        assert spool.add_destination(entry.dest)
        spool.append(entry, "")
    assert not spool.add_destination(_entries(10)[9].dest)
    assert spool.has_destination(_entries(10)[0].dest)
    assert not spool.has_destination("s3://b/out/other")
    spool.close()

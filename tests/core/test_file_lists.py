"""The file list and the partition list (`core.formats.file_list`), on the local store and the embedded S3.

- Round trips: every entry back as written (odd names, partitions, part ETags), the reference
  naming the object by its SHA-256, size and rows; pyarrow reads the stored bytes as they are, with
  the contract's metadata, columns and row groups.
- Order: the lists are sorted as S3 lists keys (decoded, not as the encoded URIs sort), partitions
  as directories; a writer given anything else refuses before it uploads.
- Damage: a list flipped, truncated, grown, swapped for another job's, or whose reference is wrong
  in any of its numbers, is refused naming the list; a page read refuses what a page can tell.
- Size: a page read through ranged reads costs a few requests and about one row group of bytes,
  counted on the embedded S3; entries are written and read in memory that does not grow with them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tracemalloc
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.stores import DelegatingStore

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    FILE_LIST_FORMAT,
    PARTITION_LIST_FORMAT,
    ROW_GROUP_ROWS,
    TAIL_BYTES,
    FileListEntry,
    ListRef,
    file_order_key,
    iter_file_list,
    iter_partitions,
    partition_order_key,
    read_file_list_page,
    read_partition_page,
    write_file_list,
    write_partition_list,
)
from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

StoreRoot = tuple[Store, StorePath]

ODD_NAMES = [
    "with space/file name.bin",
    "with!bang/a.bin",
    "percent%25/100%.bin",
    "ünïcødé/日本語.bin",
    "year=2024/k=v=w.bin",
    "x=1/a.bin",
    "x=1.5/a.bin",
    "top-level.bin",
]


def entries_under(destination: StorePath, names: list[str]) -> list[FileListEntry]:
    """Entries for `names`, in the list's order, each with its partition and, for some, part ETags."""
    entries = []
    for index, name in enumerate(names):
        partition = name.rsplit("/", 1)[0] if "/" in name else ""
        etags = tuple(f'"etag-{index}-{part}"' for part in range(index % 3))
        entries.append(FileListEntry(destination.join(name).uri(), 10 * index, partition, etags))
    return sorted(entries, key=lambda entry: file_order_key(entry.uri))


def numbered(destination: StorePath, count: int, per_partition: int = 1000) -> Iterator[FileListEntry]:
    """`count` entries in order, generated as they are written (never all in memory)."""
    base = destination.uri()
    for index in range(count):
        partition = f"dt={index // per_partition:06d}"
        yield FileListEntry(f"{base}/{partition}/part-{index:09d}.parquet", index, partition)


def test_file_list_round_trip(store_root: StoreRoot) -> None:
    store, root = store_root
    destination = root.join("table")
    layout = JobLayout(destination, "job-1")
    entries = entries_under(destination, ODD_NAMES)
    ref = write_file_list(store, layout, entries)

    stored = store.read_bytes(ref.path_under(destination))
    assert ref.path_under(destination) == layout.file_list(ref.sha256)
    assert ref.path == f"_airflow_commit/job-1/files-{ref.sha256}.parquet"
    assert (ref.sha256, ref.bytes, ref.entries) == (
        hashlib.sha256(stored).hexdigest(),
        len(stored),
        len(entries),
    )
    assert list(iter_file_list(store, destination, ref)) == entries
    assert read_file_list_page(store, destination, ref, 2, 3) == entries[2:5]
    assert read_file_list_page(store, destination, ref, len(entries) - 1, 10) == entries[-1:]
    assert read_file_list_page(store, destination, ref, len(entries), 10) == []

    # pyarrow reads the stored bytes as they are: the contract's metadata, columns and rows.
    parquet = pq.ParquetFile(io.BytesIO(stored))
    metadata = parquet.schema_arrow.metadata
    assert metadata[b"airflow_commit.format"] == FILE_LIST_FORMAT.encode()
    assert metadata[b"airflow_commit.jobId"] == b"job-1"
    assert metadata[b"airflow_commit.destination"] == destination.uri().encode()
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    table = parquet.read()
    assert table.column_names == ["path", "size", "partition", "part_etags"]
    assert [str(field.type) for field in table.schema] == [
        "string",
        "int64",
        "string",
        "list<element: string>",
    ]
    assert table.column("path").to_pylist() == [entry.uri for entry in entries]
    assert table.column("partition").to_pylist() == [entry.partition for entry in entries]
    assert table.column("part_etags").to_pylist() == [list(entry.part_etags) for entry in entries]


def test_file_list_is_sorted_by_key_bytes_not_by_encoded_uri() -> None:
    """AWS S3 lists keys in UTF-8 byte order; the list sorts by the key each URI names."""
    destination = StorePath("s3", "bucket", "table")
    listed = [entry.uri for entry in entries_under(destination, ODD_NAMES)]
    keys = sorted(destination.join(name).key.encode() for name in ODD_NAMES)
    assert [StorePath.from_uri(uri).key.encode() for uri in listed] == keys
    assert sorted(listed) != listed, "the encoded URIs alone sort these otherwise (a%20b after a!)"


@pytest.mark.s3
def test_file_list_order_matches_a_listing_within_a_directory(s3_store: Store, s3_bucket: str) -> None:
    """On the embedded S3 too, for names of one directory: `a b` lists before `a!` (`a%20b` would
    sort after it). SeaweedFS lists directory by directory (`x=1/...` before `x=1.5/...`), where AWS
    lists by key bytes (`x=1.5/...` first), so the directories are left out here."""
    destination = StorePath("s3", s3_bucket, "table")
    names = ["dt=1/a b.bin", "dt=1/a!.bin", "dt=1/a%25.bin", "dt=1/ü.bin", "dt=1/z.bin"]
    for name in names:
        s3_store.write_bytes(destination.join(name), b"x")
    listed = [status.path.uri() for status in s3_store.list_files(destination)]
    assert [entry.uri for entry in entries_under(destination, names)] == listed
    assert sorted(listed) != listed


def test_partition_list_round_trip(store_root: StoreRoot) -> None:
    store, root = store_root
    destination = root.join("table")
    layout = JobLayout(destination, "job-1")
    names = ["x=1", "x=1.5", "x=10", "x=2/y=ü %", "x=2/y=a"]
    ordered = sorted(names, key=partition_order_key)
    assert ordered.index("x=1.5") < ordered.index("x=1"), (
        "as their files' keys list: x=1.5/... before x=1/..."
    )
    partitions = [
        (name, PartitionStats(i, 100 * i, None if i % 2 else 7 * i)) for i, name in enumerate(ordered)
    ]
    ref = write_partition_list(store, layout, partitions)

    assert ref.path == f"_airflow_commit/job-1/partitions-{ref.sha256}.parquet"
    assert ref.entries == len(partitions)
    assert list(iter_partitions(store, destination, ref)) == partitions
    assert read_partition_page(store, destination, ref, 1, 2) == partitions[1:3]
    table = pq.read_table(io.BytesIO(store.read_bytes(ref.path_under(destination))))
    assert table.schema.metadata[b"airflow_commit.format"] == PARTITION_LIST_FORMAT.encode()
    assert table.column_names == ["partition", "files", "bytes", "rows"]
    assert table.column("rows").null_count == len(partitions) // 2


def finished_in_one_pass(keys: list[str]) -> list[str]:
    """The partitions of `keys` (sorted) in the order one pass finishes them, holding only the
    partitions along the current path (as job commit's pass over its sorted spool does)."""
    finished: list[str] = []
    open_partitions: list[str] = []
    for key in keys:
        directory = key.rpartition("/")[0]
        while open_partitions and not (directory + "/").startswith(open_partitions[-1] + "/"):
            finished.append(open_partitions.pop())
        if directory and (not open_partitions or open_partitions[-1] != directory):
            open_partitions.append(directory)
    return finished + open_partitions[::-1]


@given(
    st.sets(
        st.lists(
            st.text(st.sampled_from("ab=1.5 -!/_ü"), min_size=1, max_size=4), min_size=1, max_size=3
        ).map("/".join),
        max_size=30,
    )
)
@settings(max_examples=300, deadline=None)
def test_one_pass_over_sorted_keys_finishes_partitions_in_partition_order(names: set[str]) -> None:
    """What lets job commit write the partition list while it streams the file list: both orders agree."""
    keys = sorted(
        name for name in names if "//" not in name and not name.startswith("/") and not name.endswith("/")
    )
    partitions = {key.rpartition("/")[0] for key in keys} - {""}
    assert finished_in_one_pass(keys) == sorted(partitions, key=partition_order_key)


@pytest.mark.parametrize(
    ("names", "words"),
    [
        (["b.bin", "a.bin"], "is not after the previous entry"),
        (["a.bin", "a.bin"], "is not after the previous entry"),
        (["a!.bin", "a b.bin"], "is not after the previous entry"),  # sorted as URIs, not as keys
    ],
)
def test_a_writer_refuses_entries_out_of_order_before_it_uploads(
    local_root: StorePath, names: list[str], words: str
) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    layout = JobLayout(local_root.join("table"), "job-1")
    entries = [FileListEntry(layout.destination.join(name).uri(), 1) for name in names]
    with pytest.raises(ValueError, match=words) as caught:
        write_file_list(store, layout, entries)
    assert "job job-1" in str(caught.value)
    with pytest.raises(ValueError, match="bad entry"):
        write_file_list(store, layout, [FileListEntry(layout.destination.join("a").uri(), -1)])
    with pytest.raises(ValueError, match="is not after the previous partition"):
        write_partition_list(store, layout, [("x=1", PartitionStats(1, 1)), ("x=1.5", PartitionStats(1, 1))])
    assert list(store.list_files(layout.destination)) == [], "nothing uploaded"


def damaged(
    store: Store, destination: StorePath, ref: ListRef, other: ListRef
) -> dict[str, tuple[ListRef, bytes]]:
    """Ways a list and its reference disagree: (reference, bytes stored at its path)."""
    data = store.read_bytes(ref.path_under(destination))
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    return {
        "flipped": (ref, bytes(flipped)),
        "truncated": (ref, data[:-1]),
        "grown": (ref, data + b"\0"),
        "swapped": (ref, store.read_bytes(other.path_under(destination))),
        "entries": (dataclasses.replace(ref, entries=ref.entries + 1), data),
        "sha256": (dataclasses.replace(ref, sha256="0" * 64), data),
    }


@pytest.mark.parametrize("case", ["flipped", "truncated", "grown", "swapped", "entries", "sha256"])
def test_a_damaged_or_swapped_list_is_refused_naming_it(store_root: StoreRoot, case: str) -> None:
    store, root = store_root
    destination = root.join("table")
    ref = write_file_list(store, JobLayout(destination, "job-1"), numbered(destination, 3000))
    other = write_file_list(store, JobLayout(destination, "job-2"), numbered(destination, 2999))
    forged, data = damaged(store, destination, ref, other)[case]
    store.write_bytes(ref.path_under(destination), data)
    source = f"{destination.join('_SUCCESS')}"
    with pytest.raises(InvalidCommitDataError) as caught:
        next(iter_file_list(store, destination, forged, source))
    message = str(caught.value)
    assert message.startswith(f"{ref.path_under(destination)} (named by {source}): "), message
    assert "\n" not in message
    expected = {
        "flipped": "its SHA-256 is",
        "swapped": "its reference says",  # its size or SHA-256, whichever differs first
        "sha256": "its SHA-256 is",
        "truncated": f"has {ref.bytes - 1} bytes, its reference says {ref.bytes}",
        "grown": f"has more than {ref.bytes} bytes",
        "entries": f"has {ref.entries} entries, its reference says {ref.entries + 1}",
    }[case]
    assert expected in message
    # A page read checks what a page can: the object's size, and the rows the footer counts.
    if case in ("truncated", "grown", "entries"):
        with pytest.raises(InvalidCommitDataError, match="its reference says") as page_error:
            read_file_list_page(store, destination, forged, 0, 10, source)
        assert str(page_error.value).startswith(str(ref.path_under(destination)))


def test_a_list_of_the_other_kind_or_no_parquet_is_refused(local_root: StorePath) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    destination = local_root.join("table")
    layout = JobLayout(destination, "job-1")
    partitions = write_partition_list(store, layout, [("x=1", PartitionStats(1, 1))])
    with pytest.raises(InvalidCommitDataError, match=f"format is '{PARTITION_LIST_FORMAT}', expected"):
        list(iter_file_list(store, destination, partitions))
    text = b"not parquet at all"
    sha = hashlib.sha256(text).hexdigest()
    store.write_bytes(layout.file_list(sha), text)
    fake = ListRef(layout.file_list(sha).relative_to(destination), sha, len(text), 1)
    with pytest.raises(InvalidCommitDataError, match="not a Parquet file") as caught:
        list(iter_file_list(store, destination, fake))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("x", "is not a list reference"),
        ({"path": "../x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": 1}, "path"),
        ({"path": "/abs/x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": 1}, "path"),
        ({"path": "s3://b/x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": 1}, "path"),
        ({"path": "a//x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": 1}, "path"),
        ({"path": "a\x00/x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": 1}, "path"),
        (
            {
                "path": "_airflow_commit/j/files-" + "b" * 64 + ".parquet",
                "sha256": "a" * 64,
                "bytes": 1,
                "entries": 1,
            },
            "path",
        ),
        ({"path": "x-" + "A" * 64 + ".parquet", "sha256": "A" * 64, "bytes": 1, "entries": 1}, "sha256"),
        ({"path": "x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": -1, "entries": 1}, "bytes -1"),
        (
            {"path": "x-" + "a" * 64 + ".parquet", "sha256": "a" * 64, "bytes": 1, "entries": True},
            "entries True",
        ),
    ],
)
def test_a_list_reference_that_could_lead_elsewhere_is_refused(value: object, words: str) -> None:
    with pytest.raises(InvalidCommitDataError, match=words) as caught:
        ListRef.from_json(value, "s3://b/t/_SUCCESS", "fileList")
    assert str(caught.value).startswith("s3://b/t/_SUCCESS: field 'fileList'")


class CountingStore(DelegatingStore):
    """Counts the ranged reads made through it and the bytes they returned."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.ranged_reads = 0
        self.bytes_read = 0

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        data = super().read_range(path, start, length)
        self.ranged_reads += 1
        self.bytes_read += len(data)
        return data


@pytest.mark.s3
def test_a_page_costs_a_few_ranged_reads_and_about_one_row_group(s3_store: Store, s3_bucket: str) -> None:
    """On the embedded S3: a page is the tail (footer) and the row group(s) it lies in, never the list."""
    destination = StorePath("s3", s3_bucket, "table")
    total = 6 * ROW_GROUP_ROWS + 1234
    ref = write_file_list(s3_store, JobLayout(destination, "job-1"), numbered(destination, total))
    footer = pq.ParquetFile(io.BytesIO(s3_store.read_bytes(ref.path_under(destination)))).metadata
    groups = [footer.row_group(i) for i in range(footer.num_row_groups)]
    assert [group.num_rows for group in groups] == [ROW_GROUP_ROWS] * 6 + [1234]
    biggest_group = max(
        sum(group.column(column).total_compressed_size for column in range(group.num_columns))
        for group in groups
    )

    for offset, limit, groups_read in [(4 * ROW_GROUP_ROWS + 7, 100, 1), (ROW_GROUP_ROWS - 50, 100, 2)]:
        counting = CountingStore(s3_store)
        gets_before = s3_store.statistics.snapshot().get("op_get", 0)
        page = read_file_list_page(counting, destination, ref, offset, limit)
        assert [entry.size for entry in page] == list(range(offset, offset + limit))
        gets = s3_store.statistics.snapshot()["op_get"] - gets_before
        assert gets == counting.ranged_reads <= 1 + 4 * groups_read, (
            "the tail, then a few reads per row group"
        )
        assert counting.bytes_read <= TAIL_BYTES + groups_read * biggest_group + 1
        assert counting.bytes_read < ref.bytes / 2, (
            f"a page read {counting.bytes_read} of the list's {ref.bytes} bytes"
        )
        print(
            f"page of {limit} at {offset}: {gets} ranged GETs, {counting.bytes_read:,} bytes "
            f"of a {ref.bytes:,}-byte list of {ref.entries:,} entries"
        )


#: The sizes whose peaks are compared, ten times apart, both past the reader's first batches (at
#: 10,000 entries its peak is still lower); `bench/` measures a million.
SMALL_LIST, LARGE_LIST = 20_000, 200_000
#: What a peak may grow by per entry more. The list's own bytes (about 2 an entry, zstd) are held
#: until a transfer chunk (`TRANSFER_CHUNK`, 8 MiB: some 4 million entries) fills, so they grow
#: here; a reference kept per entry (8 bytes and a list's spare room) is over it.
SLACK_PER_ENTRY = 6


@pytest.mark.slow
def test_entries_are_written_and_read_in_memory_that_does_not_grow_with_them(local_root: StorePath) -> None:
    """Python's allocations (tracemalloc) and Arrow's (its memory pool) stay flat: at 200,000
    entries they are what they are at 20,000, give or take the list's bytes in a transfer chunk.
    A warm-up first, so that what pyarrow imports on first use (pandas, some 20 MiB) is not counted."""
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    warm = local_root.join("warm-up")
    list(iter_file_list(store, warm, write_file_list(store, JobLayout(warm, "job-0"), numbered(warm, 10))))
    peaks = {}
    for count in (SMALL_LIST, LARGE_LIST):
        destination = local_root.join(f"table-{count}")
        tracemalloc.start()
        try:
            ref = write_file_list(store, JobLayout(destination, "job-1"), numbered(destination, count))
            written = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            arrow = read = 0
            for index, entry in enumerate(iter_file_list(store, destination, ref)):
                assert entry.size == index
                read += 1
                if index % 5_000 == 0:
                    arrow = max(arrow, pa.total_allocated_bytes())
            assert read == count == ref.entries
            peaks[count] = (written, tracemalloc.get_traced_memory()[1], arrow)
        finally:
            tracemalloc.stop()
        print(f"{count:>9,} entries, a {ref.bytes:,}-byte list: peaks (write, read, Arrow) {peaks[count]}")
        store.delete_tree(destination)
    small, large = peaks[SMALL_LIST], peaks[LARGE_LIST]
    slack = SLACK_PER_ENTRY * (LARGE_LIST - SMALL_LIST)
    for kind, at_small, at_large in zip(("write", "read", "arrow"), small, large, strict=True):
        assert at_large < at_small + slack, (
            f"{kind}: {at_small:,} bytes at {SMALL_LIST:,}, {at_large:,} at {LARGE_LIST:,}"
        )
    assert max(large) < 32 * 1024**2, f"peaks at {LARGE_LIST:,} entries: {large}"

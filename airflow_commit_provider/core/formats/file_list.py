"""The file list and the partition list: what grows with a job, kept beside its `_SUCCESS`.

A `_SUCCESS` and a job record stay small whatever the job wrote (`docs/bounded-commits.md`): every
committed file, and past `PARTITIONS_LIMIT` every partition, goes instead into a Parquet file under
`_airflow_commit/<jobId>/` (`JobLayout.file_list`, `JobLayout.partition_list`), which `_SUCCESS`,
the record and the job outcome name by a `ListRef`: its path, the SHA-256 of its bytes (also its
name), its size and its row count. Parquet because Spark, pyarrow and DuckDB read it as it is, and
because it is paged: a reader takes one row group through ranged reads.

Writers stream: rows go to a local temporary file in row groups, the file is hashed and uploaded,
so a job of any size is written in bounded memory. `iter_file_list` and `iter_partitions` check a
whole list against its reference (bytes, SHA-256, rows) before they yield its first row;
`read_file_list_page` and `read_partition_page` read one page and check what a page can: the
object's size, format and row count.

pyarrow is imported where a list is written or read, so a sensor that reads only a `_SUCCESS`
never loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, TypeGuard, TypeVar
from urllib.parse import unquote

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.sorted_spool import key_order
from airflow_commit_provider.core.store.base import StoreError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_commit_provider.core.layout import JobLayout
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store.base import Store

FILE_LIST_FORMAT = "airflow_commit.FileList/1"
PARTITION_LIST_FORMAT = "airflow_commit.PartitionList/1"
#: The key-value metadata of both lists (the Parquet footer's).
FORMAT_KEY = "airflow_commit.format"
JOB_ID_KEY = "airflow_commit.jobId"
DESTINATION_KEY = "airflow_commit.destination"
COMPRESSION = "zstd"
#: Rows per row group, the unit a page read fetches; fewer when `ROW_GROUP_BYTES` fill first
#: (long paths), which bounds what a writer holds and a page read fetches.
ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 16 * 1024 * 1024
#: Rows a writer turns into Arrow at a time, so it holds few Python objects.
_CHUNK_ROWS = 4096
#: Bytes per ranged read when a whole list is fetched to be checked.
TRANSFER_CHUNK = 8 * 1024 * 1024
#: Bytes per read when a written list is hashed: small, because glibc serves freed blocks of up to
#: the largest one freed from its heap and keeps them resident (8 MiB reads and the copy into a
#: write stream left job commit 25 MB larger at 1M files); the list is then published from its
#: local file by `Store.write_stream`, never copied.
_HASH_CHUNK = 1024 * 1024
#: The tail a page read fetches first: Parquet's footer (pyarrow reads the last 64 KiB first too).
TAIL_BYTES = 64 * 1024
#: Rows a reader converts to Python objects at a time.
_READ_BATCH_ROWS = 8192

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_T = TypeVar("_T")


@dataclass(frozen=True)
class ListRef:
    """Where a list is and what it must be: `path` relative to the job's destination (for a
    partition marker, its directory minus its partition), the SHA-256 of its bytes, which its name
    carries, its size in bytes and its number of rows (`entries`)."""

    path: str
    sha256: str
    bytes: int
    entries: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes, "entries": self.entries}

    @classmethod
    def from_json(cls, value: object, source: str, field: str) -> ListRef:
        """A reference read from `source`'s `field`, refused naming both unless it is a relative path
        without `.`, `..` or control characters that ends with its own SHA-256
        (``...-<sha256>.parquet``): a reference can never lead a reader outside the destination it
        was found in."""
        where = f"{source}: field {field!r}"
        if not isinstance(value, dict):
            raise InvalidCommitDataError(f"{where} is not a list reference (an object)")
        path, sha256, size, entries = (value.get(key) for key in ("path", "sha256", "bytes", "entries"))
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise InvalidCommitDataError(f"{where}: sha256 {sha256!r} is not 64 lowercase hex digits")
        if not _is_count(size) or not _is_count(entries):
            raise InvalidCommitDataError(
                f"{where}: bytes {size!r} and entries {entries!r} must be counts (integers >= 0)"
            )
        if (
            not isinstance(path, str)
            or path.startswith("/")
            or "://" in path
            or "\\" in path
            or _CONTROL.search(path)
            or any(part in ("", ".", "..") for part in path.split("/"))
            or not path.endswith(f"-{sha256}.parquet")
        ):
            raise InvalidCommitDataError(
                f"{where}: path {path!r} is not a relative path named by its sha256 (...-<sha256>.parquet)"
            )
        return cls(path, sha256, size, entries)

    @classmethod
    def read_field(cls, obj: Mapping[str, Any], name: str, source: str) -> ListRef | None:
        """The reference in field `name` of a `_SUCCESS`, record or outcome; None when absent."""
        value = obj.get(name)
        return None if value is None else cls.from_json(value, source, name)

    def path_under(self, destination: StorePath) -> StorePath:
        """The list's path in the store, for the `destination` it is relative to."""
        return destination.join(self.path)


@dataclass(frozen=True)
class FileListEntry:
    """One committed file: its URI (as `StorePath.uri` writes it), size, partition directory
    relative to the destination (``""`` at the top) and, for a pending upload, its part ETags."""

    uri: str
    size: int
    partition: str = ""
    part_etags: tuple[str, ...] = ()


def file_order_key(uri: str) -> bytes:
    """What the file list is sorted by: the key a URI names (percent-decoded) in the UTF-8 byte order
    S3 lists keys in (`sorted_spool.key_order`, job commit's order). All URIs of one list share their
    scheme and bucket."""
    return key_order(unquote(uri, errors="surrogateescape") if "%" in uri else uri)


def partition_order_key(partition: str) -> bytes:
    """What the partition list is sorted by: the order in which one pass over the sorted file list
    finishes the partitions. As their files' keys list (``x=1.5`` before ``x=1``: ``x=1.5/...`` lists
    before ``x=1/...``), and a partition after those inside it (``a=1/b=2`` before ``a=1``, whose
    own files list around them): the partition as a directory, then a byte no UTF-8 key holds."""
    return key_order(partition + "/") + _AFTER_ITS_SUBDIRECTORIES


#: After everything inside a directory: after `/`, a byte that no UTF-8 text holds.
_AFTER_ITS_SUBDIRECTORIES = b"\xff"


# Writing ---------------------------------------------------------------------------------------
def file_list_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("path", pa.string(), nullable=False),
            pa.field("size", pa.int64(), nullable=False),
            pa.field("partition", pa.string(), nullable=False),
            pa.field("part_etags", pa.list_(pa.string()), nullable=False),
        ]
    )


def partition_list_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("partition", pa.string(), nullable=False),
            pa.field("files", pa.int64(), nullable=False),
            pa.field("bytes", pa.int64(), nullable=False),
            pa.field("rows", pa.int64(), nullable=True),
        ]
    )


def _writer_pool() -> Any:
    """The allocator a list writer's buffers come from: the C library's. pyarrow's default pool
    (mimalloc or jemalloc) keeps the pages it freed for the next allocation, which suits an
    executor writing data all day; a driver writes one list per job commit, and those pages stayed
    resident after it (job commit at 100k files: "write lists" added 41 MB with the default pool,
    28 MB with this one)."""
    import pyarrow as pa

    return pa.system_memory_pool()


class _ListWriter:
    """Rows into a local temporary Parquet file, in row groups of `ROW_GROUP_ROWS` (or
    `ROW_GROUP_BYTES`), then hashed and uploaded under the name its SHA-256 gives."""

    def __init__(
        self,
        schema: pa.Schema,
        fmt: str,
        layout: JobLayout,
        path_of: Callable[[str], StorePath],
        dictionary: list[str],
    ) -> None:
        import pyarrow.parquet as pq

        self._schema = schema.with_metadata(
            {FORMAT_KEY: fmt, JOB_ID_KEY: layout.job_id, DESTINATION_KEY: layout.destination.uri()}
        )
        self._layout = layout
        self._path_of = path_of
        # Unlinked at once; closed by `finish` or `discard` (the writer's owner's `with`).
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="airflow-commit-list-")  # noqa: SIM115
        self._writer = pq.ParquetWriter(
            self._file,
            self._schema,
            compression=COMPRESSION,
            use_dictionary=dictionary,
            memory_pool=_writer_pool(),
        )
        self._columns: list[list[Any]] = [[] for _ in schema]
        self._group: list[pa.RecordBatch] = []
        self._group_rows = 0
        self._group_bytes = 0
        self.rows = 0

    def _added(self) -> None:
        """A row was appended to `_columns` (by the subclass, column by column: the hot path)."""
        self.rows += 1
        if self.rows % _CHUNK_ROWS == 0:
            self._seal_chunk()

    def _seal_chunk(self) -> None:
        import pyarrow as pa

        if not self._columns[0]:
            return
        batch = pa.record_batch(
            [
                pa.array(column, type=field.type, memory_pool=_writer_pool())
                for column, field in zip(self._columns, self._schema, strict=True)
            ],
            schema=self._schema,
        )
        self._columns = [[] for _ in self._schema]
        self._group.append(batch)
        self._group_rows += batch.num_rows
        self._group_bytes += batch.nbytes
        if self._group_rows >= ROW_GROUP_ROWS or self._group_bytes >= ROW_GROUP_BYTES:
            self._write_group()

    def _write_group(self) -> None:
        import pyarrow as pa

        if self._group:
            table = pa.Table.from_batches(self._group, schema=self._schema)
            self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._group, self._group_rows, self._group_bytes = [], 0, 0

    def finish(self, store: Store) -> ListRef:
        """Close the file, hash it, upload it under its name; the reference to it."""
        try:
            self._seal_chunk()
            self._write_group()
            self._writer.close()
            size = self._file.tell()
            self._file.seek(0)
            digest = hashlib.sha256()
            for chunk in iter(lambda: self._file.read(_HASH_CHUNK), b""):
                digest.update(chunk)
            path = self._path_of(digest.hexdigest())
            store.write_stream(path, self._file)
            return ListRef(path.relative_to(self._layout.destination), digest.hexdigest(), size, self.rows)
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop the temporary file (unlinked already: closing it frees the disk)."""
        if self._writer.is_open:
            self._writer.close()
        self._file.close()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *_: object) -> None:
        self.discard()


class FileListWriter(_ListWriter):
    """The file list of one job, fed in order: `add` each committed file sorted by `file_order_key`,
    then `finish(store)` uploads it and returns its `ListRef`. Holds one row group at most."""

    def __init__(self, layout: JobLayout) -> None:
        super().__init__(file_list_schema(), FILE_LIST_FORMAT, layout, layout.file_list, ["partition"])
        self._last: bytes | None = None

    def add(self, entry: FileListEntry) -> None:
        """Append one file; ValueError (a writer's mistake, before anything is uploaded) when it is
        not after the previous one, or not a URI and size."""
        uri, size = entry.uri, entry.size
        if type(uri) is not str or not uri or type(size) is not int or size < 0:
            raise ValueError(f"file list of job {self._layout.job_id}: bad entry {entry!r}")
        key = file_order_key(uri)
        if self._last is not None and key <= self._last:
            raise ValueError(
                f"file list of job {self._layout.job_id}: {uri!r} is not after the previous "
                "entry (entries must come sorted by key, each once)"
            )
        self._last = key
        paths, sizes, partitions, part_etags = self._columns
        paths.append(uri)
        sizes.append(size)
        partitions.append(entry.partition)
        part_etags.append(entry.part_etags)
        self._added()


class PartitionListWriter(_ListWriter):
    """The partition list of one job, fed in `partition_order_key` order, as the file list is."""

    def __init__(self, layout: JobLayout) -> None:
        super().__init__(partition_list_schema(), PARTITION_LIST_FORMAT, layout, layout.partition_list, [])
        self._last: bytes | None = None

    def add(self, partition: str, stats: PartitionStats) -> None:
        if not isinstance(partition, str) or not partition:
            raise ValueError(f"partition list of job {self._layout.job_id}: bad partition {partition!r}")
        key = partition_order_key(partition)
        if self._last is not None and key <= self._last:
            raise ValueError(
                f"partition list of job {self._layout.job_id}: {partition!r} is not after the previous "
                "partition (partitions must come in `partition_order_key` order, each once)"
            )
        self._last = key
        for column, value in zip(
            self._columns, (partition, stats.files, stats.bytes, stats.rows), strict=True
        ):
            column.append(value)
        self._added()


def write_file_list(store: Store, layout: JobLayout, entries: Iterable[FileListEntry]) -> ListRef:
    """Write the job's file list from `entries` sorted by `file_order_key`; its reference."""
    with FileListWriter(layout) as writer:
        for entry in entries:
            writer.add(entry)
        return writer.finish(store)


def write_partition_list(
    store: Store, layout: JobLayout, partitions: Iterable[tuple[str, PartitionStats]]
) -> ListRef:
    """Write the job's partition list from (partition, stats) sorted by `partition_order_key`."""
    with PartitionListWriter(layout) as writer:
        for partition, stats in partitions:
            writer.add(partition, stats)
        return writer.finish(store)


# Reading ---------------------------------------------------------------------------------------
def iter_file_list(
    store: Store, root: StorePath, ref: ListRef, source: str | None = None
) -> Iterator[FileListEntry]:
    """Every entry of the file list `ref` (relative to `root`), in order, in bounded memory.

    The list is fetched (ranged reads into a local temporary file) and checked against `ref`
    before its first entry is yielded. InvalidCommitDataError names the list (and `source`, the
    file that referenced it) when its size, SHA-256, format, columns or row count differ from what
    the reference and the format say, or an entry is not a URI and a size.
    """
    path = ref.path_under(root)
    with _fetch_verified(store, path, ref, source) as local:
        parquet = _open(local, path, ref, FILE_LIST_FORMAT, file_list_schema(), source)
        yield from _entries(_batches(parquet, path, source), path, 0)


def iter_partitions(
    store: Store, root: StorePath, ref: ListRef, source: str | None = None
) -> Iterator[tuple[str, PartitionStats]]:
    """Every (partition, stats) of the partition list `ref`, in order, checked as `iter_file_list`."""
    path = ref.path_under(root)
    with _fetch_verified(store, path, ref, source) as local:
        parquet = _open(local, path, ref, PARTITION_LIST_FORMAT, partition_list_schema(), source)
        yield from _partitions(_batches(parquet, path, source), path, 0)


def read_file_list_page(
    store: Store, root: StorePath, ref: ListRef, offset: int, limit: int, source: str | None = None
) -> list[FileListEntry]:
    """Entries `offset` to `offset + limit` of the file list (fewer at its end), read through ranged
    reads: the footer, then the row groups the page lies in. Checks the object's size, format and
    row count against `ref` (not its SHA-256, which would take the whole file)."""
    path = ref.path_under(root)
    with _RangedFile(store, path, ref.bytes, source) as ranged:
        parquet = _open(ranged, path, ref, FILE_LIST_FORMAT, file_list_schema(), source)
        groups, first = _page_groups(parquet, offset, limit)
        batches = _page_rows(_batches(parquet, path, source, groups), offset - first, limit)
        return list(_entries(batches, path, offset))


def read_partition_page(
    store: Store, root: StorePath, ref: ListRef, offset: int, limit: int, source: str | None = None
) -> list[tuple[str, PartitionStats]]:
    """A page of the partition list, read and checked as `read_file_list_page` reads the file list."""
    path = ref.path_under(root)
    with _RangedFile(store, path, ref.bytes, source) as ranged:
        parquet = _open(ranged, path, ref, PARTITION_LIST_FORMAT, partition_list_schema(), source)
        groups, first = _page_groups(parquet, offset, limit)
        batches = _page_rows(_batches(parquet, path, source, groups), offset - first, limit)
        return list(_partitions(batches, path, offset))


def find_partitions(
    store: Store, root: StorePath, ref: ListRef, wanted: Iterable[str], source: str | None = None
) -> set[str]:
    """Which of the partitions `wanted` the partition list `ref` holds, without reading all of it.

    Through ranged reads: the list's last `TAIL_BYTES` (its footer; the whole list when it is no
    larger), then, of each row group whose `partition` statistics (min and max, which Parquet keeps
    in the footer) cover one of `wanted`, the `partition` column alone: one request per such row
    group, none when the tail held it. The list is sorted by `partition_order_key`, not by the
    names' own order, so a name may fall within the bounds of a group that does not hold it; the
    groups read are then checked row by row. Checks the object's size, format and row count as a
    page read does.
    """
    names = set(wanted)
    path = ref.path_under(root)
    with _RangedFile(store, path, ref.bytes, source) as ranged:
        parquet = _open(ranged, path, ref, PARTITION_LIST_FORMAT, partition_list_schema(), source)
        found: set[str] = set()
        for index in range(parquet.metadata.num_row_groups):
            statistics = parquet.metadata.row_group(index).column(0).statistics
            if names - found and _may_hold(statistics, names - found):
                for batch in _batches(parquet, path, source, [index], ["partition"]):
                    found.update(name for name in batch.column(0).to_pylist() if name in names)
        return found


def _may_hold(statistics: Any, names: set[str]) -> bool:
    """Whether a row group with these column statistics may hold one of `names`: yes, unless its
    minimum and maximum are known and every name lies outside them."""
    if statistics is None or not statistics.has_min_max:
        return True
    low, high = statistics.min, statistics.max
    if not isinstance(low, str) or not isinstance(high, str):
        return True
    return any(low <= name <= high for name in names)


def _page_rows(batches: Iterable[pa.RecordBatch], skip: int, limit: int) -> Iterator[pa.RecordBatch]:
    """The `limit` rows of `batches` after their first `skip`, sliced in Arrow: a page of 100 rows
    in a row group of 65,536 becomes 100 Python objects, not the group's."""
    for batch in batches:
        if limit <= 0:
            return
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        rows = batch.slice(skip, limit)
        skip, limit = 0, limit - rows.num_rows
        yield rows


def _page_groups(parquet: pq.ParquetFile, offset: int, limit: int) -> tuple[list[int], int]:
    """The row groups rows `offset` to `offset + limit` lie in, and the index of their first row."""
    if offset < 0 or limit < 0:
        raise ValueError(f"a page starts at an entry >= 0 and has >= 0 entries, not {offset} and {limit}")
    groups: list[int] = []
    first = start = 0
    for index in range(parquet.metadata.num_row_groups):
        rows = parquet.metadata.row_group(index).num_rows
        if start + rows > offset and start < offset + limit:
            if not groups:
                first = start
            groups.append(index)
        start += rows
    return groups, first if groups else offset


def _batches(
    parquet: pq.ParquetFile,
    path: StorePath,
    source: str | None,
    groups: list[int] | None = None,
    columns: list[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The list's rows in batches (of the row groups `groups`, else of all; of the `columns`, else
    of all), a damaged page refused naming the list; the store's own errors pass as they are.
    Decoded as they are taken: a page that ends early in its row group decodes no further."""
    import pyarrow as pa

    try:
        if groups is None or groups:
            yield from parquet.iter_batches(batch_size=_READ_BATCH_ROWS, row_groups=groups, columns=columns)
    except StoreError:
        raise
    except (pa.ArrowException, OSError) as error:
        raise InvalidCommitDataError(f"{_named(path, source)}: cannot be read: {_one_line(error)}") from error


def _entries(batches: Iterable[pa.RecordBatch], path: StorePath, first: int) -> Iterator[FileListEntry]:
    row = first
    for batch in batches:
        paths, sizes, partitions, etags = (batch.column(i).to_pylist() for i in range(4))
        for uri, size, partition, part_etags in zip(paths, sizes, partitions, etags, strict=True):
            if not isinstance(uri, str) or not uri or not _is_count(size) or not isinstance(partition, str):
                raise InvalidCommitDataError(
                    f"{path}: row {row} is not a URI, a size and a partition: {uri!r}, {size!r}, {partition!r}"
                )
            if part_etags is None or not all(isinstance(etag, str) for etag in part_etags):
                raise InvalidCommitDataError(f"{path}: row {row}: part_etags {part_etags!r} are not ETags")
            yield FileListEntry(uri, size, partition, tuple(part_etags))
            row += 1


def _partitions(
    batches: Iterable[pa.RecordBatch], path: StorePath, first: int
) -> Iterator[tuple[str, PartitionStats]]:
    row = first
    for batch in batches:
        names, files, sizes, rows = (batch.column(i).to_pylist() for i in range(4))
        for name, count, size, counted in zip(names, files, sizes, rows, strict=True):
            if (
                not isinstance(name, str)
                or not name
                or not _is_count(count)
                or not _is_count(size)
                or not (counted is None or _is_count(counted))
            ):
                raise InvalidCommitDataError(
                    f"{path}: row {row} is not a partition with counts: {name!r}, {count!r}, {size!r}, {counted!r}"
                )
            yield name, PartitionStats(count, size, counted)
            row += 1


def _open(
    file: IO[bytes] | io.RawIOBase,
    path: StorePath,
    ref: ListRef,
    fmt: str,
    schema: pa.Schema,
    source: str | None,
) -> pq.ParquetFile:
    """The list as Parquet, refused (naming it) unless it is of format `fmt` with `schema`'s columns
    and as many rows as `ref` says."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file, pre_buffer=True)
    except StoreError:
        raise
    except (pa.ArrowException, OSError) as error:
        raise InvalidCommitDataError(
            f"{_named(path, source)}: not a Parquet file: {_one_line(error)}"
        ) from error
    metadata = parquet.schema_arrow.metadata or {}
    found = metadata.get(FORMAT_KEY.encode(), b"").decode("utf-8", "replace")
    if found != fmt:
        raise InvalidCommitDataError(f"{_named(path, source)}: format is {found!r}, expected {fmt!r}")
    columns = [(field.name, field.type) for field in parquet.schema_arrow]
    if columns != [(field.name, field.type) for field in schema]:
        raise InvalidCommitDataError(f"{_named(path, source)}: columns {columns} are not those of {fmt}")
    if parquet.metadata.num_rows != ref.entries:
        raise InvalidCommitDataError(
            f"{_named(path, source)}: has {parquet.metadata.num_rows} entries, its reference says {ref.entries}"
        )
    return parquet


@contextlib.contextmanager
def _fetch_verified(store: Store, path: StorePath, ref: ListRef, source: str | None) -> Iterator[IO[bytes]]:
    """The list fetched into an unlinked local temporary file by ranged reads of `TRANSFER_CHUNK`,
    hashed as it arrives, and refused unless it has exactly `ref.bytes` bytes and `ref.sha256`.
    Reads at most one byte more than the reference says, however large the object is."""
    with tempfile.TemporaryFile(prefix="airflow-commit-list-") as local:
        digest = hashlib.sha256()
        size = 0
        while size <= ref.bytes:
            chunk = store.read_range(path, size, min(TRANSFER_CHUNK, ref.bytes + 1 - size))
            if not chunk:
                break
            digest.update(chunk)
            local.write(chunk)
            size += len(chunk)
        if size != ref.bytes:
            found = f"more than {ref.bytes}" if size > ref.bytes else str(size)
            raise InvalidCommitDataError(
                f"{_named(path, source)}: has {found} bytes, its reference says {ref.bytes}"
            )
        if digest.hexdigest() != ref.sha256:
            raise InvalidCommitDataError(
                f"{_named(path, source)}: its SHA-256 is {digest.hexdigest()}, its reference says {ref.sha256}"
            )
        local.seek(0)
        yield local


class _RangedFile(io.RawIOBase):
    """A read-only, seekable file over one store object, each read one `Store.read_range`.

    Opening it reads the object's tail (where Parquet keeps its footer), one byte past the size the
    reference gives: a shorter or longer object is refused there, naming it, with no extra request.
    """

    def __init__(self, store: Store, path: StorePath, size: int, source: str | None) -> None:
        super().__init__()
        self._store, self._path, self._size = store, path, size
        self._position = 0
        self._tail_start = max(0, size - TAIL_BYTES)
        self._tail = store.read_range(path, self._tail_start, size - self._tail_start + 1)
        if len(self._tail) != size - self._tail_start:
            found = f"more than {size}" if len(self._tail) > size - self._tail_start else "fewer"
            raise InvalidCommitDataError(
                f"{_named(path, source)}: has {found} bytes, its reference says {size}"
            )

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(0, self._size - self._position))
        if wanted == 0:
            return 0
        if self._position >= self._tail_start:
            offset = self._position - self._tail_start
            data = self._tail[offset : offset + wanted]
        else:
            data = self._store.read_range(self._path, self._position, wanted)
        view[: len(data)] = data
        self._position += len(data)
        return len(data)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _named(path: StorePath, source: str | None) -> str:
    return f"{path} (named by {source})" if source else str(path)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

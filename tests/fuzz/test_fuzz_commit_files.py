"""Fuzz targets: every JSON file read from a store (task manifests, pendingsets, `.pending` files,
job outcomes, `_SUCCESS` and job records, upload records, the rows recorded per partition), the
first bytes of a `_SUCCESS` as a sensor reads them, and the list references they hold.

Each is fed its valid form damaged field by field, truncated, with a byte flipped, another JSON
value or any bytes: it is read, or refused with an InvalidCommitDataError that names the file.
Size and depth are refused before parsing (a 1 GB manifest, a deeply nested one). A prefix of a
`_SUCCESS`, cut anywhere, gives fewer fields than the whole file, never a different value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import mmap
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import (
    FUZZ,
    POSITIONS,
    accepted_or_refused,
    encoded,
    hostile_text,
    json_values,
    stored_bytes,
)

from airflow_commit_provider.core.formats import json_stream
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    FileListEntry,
    ListRef,
    file_order_key,
    iter_file_list,
    read_file_list_page,
    write_file_list,
)
from airflow_commit_provider.core.formats.json_prefix import FilePrefix, parse_prefix
from airflow_commit_provider.core.formats.jsonio import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    dumps,
    load_json,
    read_json_bytes,
)
from airflow_commit_provider.core.formats.manifest import FileEntry, TaskManifest
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.partition_rows import (
    PARTITION_ROWS_KEY,
    read_partition_rows,
    record_partition_rows,
)
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet, read_pending_commits
from airflow_commit_provider.core.formats.success import CommittedFile, SuccessData
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.entries import CommitEntry
from airflow_commit_provider.core.stages.manifests import (
    ManifestDecoder,
    decode_pendingset,
    decode_task_manifest,
)
from airflow_commit_provider.core.stages.uploads import parse_upload_records
from airflow_commit_provider.core.store.local import LocalStore

JOB = "job-1"
SOURCE = "s3://bucket/table/_temporary/job-1/00/manifests/task-manifest.json"
STATISTICS = IOStatistics(
    counters={"rows_written": 3, "committer_files_committed": 1},
    meanstatistics={"op_rename": {"samples": 1, "sum": 5}},
)
ROWS: dict[str, str] = {"rows": "3"}
record_partition_rows(ROWS, {"dt=1": 3})

MANIFEST = TaskManifest(
    JOB,
    "task_job-1_m_000000",
    "attempt_job-1_m_000000_0",
    "s3://bucket/table/_temporary/job-1/00/tasks/attempt_job-1_m_000000_0",
    files=[FileEntry("s3://bucket/t/_temporary/a%20b", "s3://bucket/t/dt=1/a%20b", 3, "etag")],
    directories=[{"d": "s3://bucket/t/dt=1"}],
    extra_data=ROWS,
    iostatistics=STATISTICS,
).to_bytes()
PENDING = PendingCommit("s3://bucket/t/dt=1/a", "bucket", "t/dt=1/a", "upload-1", ("etag-1", "etag-2"), 3)
PENDINGSET = PendingSet(
    JOB,
    "task_job-1_m_000000",
    "attempt_job-1_m_000000_0",
    [PENDING],
    STATISTICS,
    {PARTITION_ROWS_KEY: ROWS[PARTITION_ROWS_KEY]},
).to_bytes()
OUTCOME = JobOutcome(
    JOB,
    "commit",
    "magic",
    (TaskCommitResult("task_job-1_m_000000", "attempt_job-1_m_000000_0", SOURCE, 1, 3, 3),),
).to_bytes()
SUCCESS = SuccessData(
    "magic",
    JOB,
    metrics={"m": 1},
    diagnostics={"d": "x"},
    filenames=["t/dt=1/a"],
    iostatistics=STATISTICS,
    partitions=["dt=1"],
    file_count=1,
    total_bytes=3,
    rows=3,
    files=[CommittedFile("s3://bucket/t/dt=1/a", 3)],
).to_bytes()
UPLOADS = json.dumps([{"uri": "s3://bucket/t/dt=1/a", "uploadId": "upload-1"}]).encode()
SHA = "0123456789abcdef" * 4
OUTCOME_WITH_LISTS = dataclasses.replace(
    JobOutcome.from_bytes(OUTCOME, SOURCE, JOB),
    file_list=ListRef(f"_airflow_commit/{JOB}/files-{SHA}.parquet", SHA, 56789, 1000),
    partition_list=ListRef(f"_airflow_commit/{JOB}/partitions-{SHA}.parquet", SHA, 1234, 300),
).to_bytes()
#: A `_SUCCESS` of the bounded format: partitions past the cap, and both lists referenced.
BOUNDED_SUCCESS = SuccessData(
    "magic",
    JOB,
    filenames=["s3://bucket/t/dt=1/a"],
    iostatistics=STATISTICS,
    partitions=["dt=1", "dt=2"],
    partition_count=300,
    partition_list=ListRef(f"_airflow_commit/{JOB}/partitions-{SHA}.parquet", SHA, 1234, 300),
    file_list=ListRef(f"_airflow_commit/{JOB}/files-{SHA}.parquet", SHA, 56789, 1000),
    file_count=1000,
    total_bytes=3000,
    rows=3,
    table="db.t",
    registered_partitions=["dt=1"],
    registered_partition_count=300,
).to_bytes()


def files_of(valid: bytes) -> st.SearchStrategy[bytes]:
    return stored_bytes(valid, json.loads(valid))


def refused_or_read(read, data, source: str = SOURCE):  # type: ignore[no-untyped-def]
    return accepted_or_refused(lambda: read(data, source), InvalidCommitDataError, source)


@FUZZ
@given(files_of(MANIFEST))
@example(MANIFEST.replace(b'"rows": "3"', b'"rows": "three"'))
@example(MANIFEST.replace(b'"rows_written": 3', b'"rows_written": "x"'))
@example(MANIFEST.replace(b'"rows_written": 3', b'"rows_written": [1]'))
@example(MANIFEST.replace(b'"counters": {', b'"counters": [], "x": {'))
@example(MANIFEST.replace(b'"samples": 1', b'"samples": null'))
@example(MANIFEST.replace(b'"op_rename": {', b'"op_rename": 1, "x": {'))
def test_task_manifests(data: bytes) -> None:
    entries = refused_or_read(streamed(decode_task_manifest), data)
    if entries is not None:
        assert all(entry.size >= 0 for entry in entries)


@FUZZ
@given(files_of(PENDINGSET))
def test_pendingsets(data: bytes) -> None:
    entries = refused_or_read(streamed(decode_pendingset), data)
    if entries is not None:
        assert all(entry.etags and entry.upload_id for entry in entries)


def streamed(decoder: ManifestDecoder) -> Callable[[bytes, str], list[CommitEntry]]:
    """A manifest decoded as job commit reads it: streamed in chunks of a few bytes (so that every
    value crosses a chunk's end somewhere), its entries as they were handed on. They are what the
    whole file says (`from_bytes`), and the summary counts them."""

    def read(data: bytes, source: str) -> list[CommitEntry]:
        entries: list[CommitEntry] = []
        with _chunks_of(7):
            summary = decoder(io.BytesIO(data), source, "task_job-1_m_000000", entries.append)
        assert (summary.files, summary.total_bytes) == (len(entries), sum(e.size for e in entries))
        return entries

    return read


@contextlib.contextmanager
def _chunks_of(size: int) -> Iterator[None]:
    original = json_stream.CHUNK_BYTES
    json_stream.CHUNK_BYTES = size
    try:
        yield
    finally:
        json_stream.CHUNK_BYTES = original


@FUZZ
@given(
    st.one_of(files_of(MANIFEST), files_of(PENDINGSET), json_values.map(encoded)),
    st.sampled_from((1, 2, 7, 64, 1 << 20)),
)
@example(b'{"commits": [1, 2], "commits": []}', 1)
@example(b'{"commits": 12', 1)
@example(b'\xef\xbb\xbf{"commits": [1.5e3]}', 2)
def test_a_streamed_object_is_what_json_loads_reads(data: bytes, chunk: int) -> None:
    """`read_object`, in chunks of any size, reads what `json.loads` of the whole file reads, its
    streamed array element by element, or refuses the file naming it; it refuses nothing
    `json.loads` reads (within the guards, and the streamed array named once)."""
    elements: list[object] = []
    with _chunks_of(chunk):
        found = accepted_or_refused(
            lambda: json_stream.read_object(io.BytesIO(data), SOURCE, {"commits": elements.append}),
            InvalidCommitDataError,
            SOURCE,
        )
    try:
        whole = load_json(data, SOURCE) if json.detect_encoding(data) in ("utf-8", "utf-8-sig") else None
    except InvalidCommitDataError:
        whole = None
    once = _members_once(data) is not None
    if found is None:
        assert whole is None or not isinstance(whole, dict) or not once, f"json.loads reads {data!r}"
        return
    assert isinstance(whole, dict), f"read, but json.loads refuses {data!r}"
    if isinstance(whole.get("commits"), list):
        assert encoded(elements) == encoded(whole.pop("commits")) and found.arrays == {
            "commits": len(elements)
        }
    assert encoded(found.members) == encoded(whole)


@FUZZ
@given(st.lists(json_values, max_size=5), st.dictionaries(hostile_text, json_values, max_size=3))
def test_a_streamed_object_is_written_as_dumps_writes_it(
    elements: list[object], tail: dict[str, object]
) -> None:
    """`write_object` writes the bytes `jsonio.dumps` writes of the whole object."""
    rest = {name: value for name, value in tail.items() if name not in ("head", "commits")}
    try:
        expected = dumps({"head": 1, "commits": elements, **rest})
    except UnicodeEncodeError:  # a lone surrogate: UTF-8 cannot hold it, whoever writes it
        return
    out = io.BytesIO()
    assert json_stream.write_object(out, {"head": 1}, "commits", iter(elements), rest) == len(elements)
    assert out.getvalue() == expected


@FUZZ
@given(files_of(PENDING.to_bytes()))
def test_single_pending_commits(data: bytes) -> None:
    refused_or_read(read_pending_commits, data, "s3://bucket/t/__magic_job-job-1/a.pending")


@FUZZ
@given(st.one_of(files_of(OUTCOME), files_of(OUTCOME_WITH_LISTS)))
def test_job_outcomes(data: bytes) -> None:
    outcome = accepted_or_refused(
        lambda: JobOutcome.from_bytes(data, SOURCE, JOB), InvalidCommitDataError, SOURCE
    )
    if outcome is not None:
        assert outcome.job_id == JOB and outcome.decision in ("commit", "abort")


@FUZZ
@given(files_of(SUCCESS))
@example(SUCCESS.replace(b'"timestamp": ', b'"timestamp": 100000000000000000000, "x": ', 1))
@example(SUCCESS.replace(b'"timestamp": ', b'"timestamp": -100000000000000000000, "x": ', 1))
def test_success_files(data: bytes) -> None:
    success = refused_or_read(SuccessData.from_bytes, data)
    if success is not None:
        success.summary()
        assert success.committed_file_count()[0] >= 0


@FUZZ
@given(files_of(BOUNDED_SUCCESS))
def test_bounded_success_files(data: bytes) -> None:
    success = refused_or_read(SuccessData.from_bytes, data)
    if success is not None:
        assert success.total_partitions >= len(success.partitions)
        assert success.partitions_complete or success.partition_list is not None
        assert success.committed_file_count()[0] >= 0


def _members_once(data: bytes) -> dict[str, object] | None:
    """The whole file's members, or None when it is not one JSON object naming each member once."""
    pairs: list[list[tuple[str, object]]] = []
    try:
        json.loads(data, object_pairs_hook=lambda found: pairs.append(found) or dict(found))
    except (ValueError, RecursionError):
        return None
    top = pairs[-1] if pairs else []
    names = [name for name, _ in top]
    return dict(top) if len(names) == len(set(names)) else None


@FUZZ
@given(st.one_of(files_of(BOUNDED_SUCCESS), files_of(SUCCESS)), st.integers(0, POSITIONS))
@example(BOUNDED_SUCCESS, 30)
@example(
    BOUNDED_SUCCESS.replace(b'"fileCount": 1000', b'"fileCount": 10001'), BOUNDED_SUCCESS.index(b"1000,") + 2
)
def test_success_prefixes(data: bytes, cut: int) -> None:
    """A sensor's read of the first bytes: read, or refused naming the file; what is read is what
    the whole file says (a member named twice aside: JSON leaves that to the reader)."""
    prefix = FilePrefix(data[: cut % (len(data) + 1)], whole=False)
    parsed = refused_or_read(parse_prefix, prefix)
    head = refused_or_read(SuccessData.from_prefix, prefix)
    whole = _members_once(data)
    if parsed is None or whole is None or not isinstance(json.loads(data), dict):
        return
    assert all(encoded(whole[name]) == encoded(value) for name, value in parsed.members.items())  # NaN too
    if head is not None and head.read_fields is not None:
        assert head.read_fields == set(parsed.members)


@FUZZ
@given(
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {
                "path": hostile_text,
                "sha256": st.just(SHA) | hostile_text,
                "bytes": json_values,
                "entries": json_values,
            }
        ),
        st.builds(
            lambda name: {"path": f"{name}-{SHA}.parquet", "sha256": SHA, "bytes": 1, "entries": 1},
            hostile_text,
        ),
    )
)
@example({"path": f"../x-{SHA}.parquet", "sha256": SHA, "bytes": 1, "entries": 1})
@example({"path": f"a/./x-{SHA}.parquet", "sha256": SHA, "bytes": 1, "entries": 1})
def test_list_references(value: object) -> None:
    """A reference is refused naming the file and field, or it leads to a file under the table."""
    ref = accepted_or_refused(
        lambda: ListRef.from_json(value, SOURCE, "fileList"), InvalidCommitDataError, SOURCE
    )
    if ref is not None:
        root = StorePath.parse("s3://bucket/table")
        assert ref.path_under(root).is_under(root) and ref.path_under(root).name.endswith(
            f"-{ref.sha256}.parquet"
        )


def _list_fixture() -> tuple[LocalStore, StorePath, bytes]:
    """A file list of 300 entries (odd and even part ETags, three partitions), written once per process."""
    global _LIST
    if _LIST is None:
        destination = StorePath.parse(tempfile.mkdtemp(prefix="fuzz-file-list-")).join("table")
        entries = [
            FileListEntry(
                destination.join(f"dt={i % 3}", f"part-{i:05d}").uri(), i, f"dt={i % 3}", ("e",) * (i % 2)
            )
            for i in range(300)
        ]
        entries.sort(key=lambda entry: file_order_key(entry.uri))
        store = LocalStore()
        ref = write_file_list(store, JobLayout(destination, JOB), entries)
        _LIST = (store, destination, store.read_bytes(ref.path_under(destination)))
    return _LIST


_LIST: tuple[LocalStore, StorePath, bytes] | None = None


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, POSITIONS), st.integers(0, 255)), min_size=1, max_size=4), st.booleans()
)
def test_file_lists_damaged_under_a_matching_reference(flips: list[tuple[int, int]], page: bool) -> None:
    """A list damaged by whoever also wrote its reference (so its size and SHA-256 match): read, or
    refused with an InvalidCommitDataError naming the list; never pyarrow's own error."""
    store, destination, valid = _list_fixture()
    data = bytearray(valid)
    for position, byte in flips:
        data[position % len(data)] = byte
    sha = hashlib.sha256(data).hexdigest()
    location = JobLayout(destination, JOB).file_list(sha)
    store.write_bytes(location, bytes(data))
    ref = ListRef(location.relative_to(destination), sha, len(data), 300)
    if page:
        read = accepted_or_refused(
            lambda: read_file_list_page(store, destination, ref, 150, 20),
            InvalidCommitDataError,
            str(location),
        )
    else:
        read = accepted_or_refused(
            lambda: list(iter_file_list(store, destination, ref)), InvalidCommitDataError, str(location)
        )
    assert read is None or all(entry.uri and entry.size >= 0 for entry in read)
    store.delete(location)


@FUZZ
@given(files_of(UPLOADS))
def test_upload_records(data: bytes) -> None:
    records = refused_or_read(parse_upload_records, data)
    assert records is None or all(isinstance(path, StorePath) for path, _upload in records)


def test_a_1_gb_file_is_refused_by_its_size_before_parsing(tmp_path: Path) -> None:
    """A sparse file mapped into memory: 1 GB long, costing no memory until a byte is read."""
    path = tmp_path / "task-manifest.json"
    with path.open("wb") as handle:
        handle.truncate(1024**3)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as huge:
        assert len(huge) > MAX_JSON_BYTES
        with pytest.raises(InvalidCommitDataError, match=rf"^{SOURCE}: 1073741824 bytes is more than"):
            TaskManifest.from_bytes(huge, SOURCE)  # type: ignore[arg-type]


def test_a_1_gb_store_file_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    """Every reader of a commit file reads it through `read_json_bytes`: a sparse 1 GB file is
    refused naming it, with next to no memory allocated (the file's size is known before a read)."""
    path = tmp_path / "task-manifest.json"
    with path.open("wb") as handle:
        handle.truncate(1024**3)
    tracemalloc.start()
    try:
        with pytest.raises(
            InvalidCommitDataError, match=rf"^file://{path}: more than the {MAX_JSON_BYTES} bytes"
        ):
            read_json_bytes(LocalStore(), StorePath.parse(str(path)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024**2, f"{peak} bytes allocated to refuse it"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 100_000])
@pytest.mark.parametrize("brackets", ["[]", "{}"])
def test_deep_nesting_is_refused_before_parsing(depth: int, brackets: str) -> None:
    nested = (
        brackets[0] * depth + brackets[1] * depth if brackets == "[]" else '{"a":' * depth + "1" + "}" * depth
    )
    with pytest.raises(
        InvalidCommitDataError, match=rf"^{SOURCE}: JSON nested deeper than {MAX_JSON_DEPTH} levels$"
    ):
        SuccessData.from_bytes(f'{{"x": {nested}}}'.encode(), SOURCE)


@pytest.mark.parametrize(
    "data",
    ["[" * 100_000 + "}", '"' + "[" * 100 + '"', '["\\\\", ' + "[" * 70 + "]" * 70 + "]", '["\\"[[["]'],
    ids=["mismatched", "brackets-in-a-string", "escaped-backslash", "escaped-quote"],
)
def test_brackets_in_strings_or_mismatched_are_not_depth(data: str) -> None:
    """Quoted brackets count for nothing; mismatched ones are invalid JSON, however deep."""
    deep = data.count("[") - data.count("]") > MAX_JSON_DEPTH or data.startswith('["\\\\", ')
    try:
        load_json(data.encode(), SOURCE)
    except InvalidCommitDataError as error:
        assert ("nested deeper" in str(error)) == deep, str(error)


@FUZZ
@given(
    st.integers(1, 3 * MAX_JSON_DEPTH), st.sampled_from(("[", '{"k":', '["[",', '{"{":')), st.text(max_size=5)
)
def test_depth_is_measured_exactly(depth: int, opening: str, leaf: str) -> None:
    closing = {"[": "]", '{"k":': "}", '["[",': "]", '{"{":': "}"}[opening]
    data = (opening * depth + json.dumps(leaf) + closing * depth).encode()
    parsed = accepted_or_refused(lambda: load_json(data, SOURCE), InvalidCommitDataError, SOURCE)
    assert (parsed is not None) == (depth <= MAX_JSON_DEPTH)


@FUZZ
@given(
    st.one_of(json_values.map(lambda value: encoded(value).decode("utf-8", "surrogatepass")), hostile_text)
)
@example('{"dt=1": 1e999}')
@example('{"dt=1": -1}')
@example("[" * 1000)
def test_rows_recorded_per_partition(recorded: str) -> None:
    rows = refused_or_read(
        lambda extra, source: read_partition_rows(extra, source), {PARTITION_ROWS_KEY: recorded}
    )
    assert rows is None or all(isinstance(count, int) and count >= 0 for count in rows.values())

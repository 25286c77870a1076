"""The S3 stand-in served from a process of its own (`bench.fake_s3_process`), as `S3Store` drives
it for `job_commit_memory commit`: it must answer as the in-process stand-in does, bodies streamed
both ways, its errors S3's, and what it keeps held in the child."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

from airflow_commit_provider.core.paths import StorePath  # noqa: E402
from airflow_commit_provider.core.store.base import FileAlreadyExistsError  # noqa: E402
from airflow_commit_provider.core.store.s3 import S3Store  # noqa: E402
from bench.fake_s3 import FakeS3Client  # noqa: E402
from bench.fake_s3_process import CHUNK, served_stand_in  # noqa: E402

#: A protocol file (kept whole by the stand-in) of several chunks and a part of one.
BODY = bytes(range(256)) * (3 * CHUNK // 256 + 5)


def _exercise(store: S3Store) -> dict[str, object]:
    """What S3Store's calls see of a stand-in: a streamed create-if-absent and its refusal, streamed
    and ranged reads, a multipart upload's life, listings."""
    seen: dict[str, object] = {}
    manifest = StorePath.parse("s3://bench/out/_temporary/0/task-manifest.json")
    store.write_stream(manifest, io.BytesIO(BODY), if_absent=True)
    with pytest.raises(FileAlreadyExistsError, match=r"task-manifest\.json"):
        store.write_stream(manifest, io.BytesIO(b"another"), if_absent=True)
    with store.open_read(manifest) as stream:
        seen["streamed"] = stream.read()
    seen["range"] = store.read_range(manifest, CHUNK - 3, 10)
    seen["saved"] = store.read_bytes(StorePath.parse("s3://bench/out/_temporary/0/saved.json"))
    seen["missing"] = store.get_status(StorePath.parse("s3://bench/out/missing.json"))

    data = StorePath.parse("s3://bench/out/part-00000.bin")
    upload = store.create_multipart_upload(data)
    etag = store.upload_part(data, upload, 1, b"x" * 1024)
    seen["pending"] = [pending.path.key for pending in store.list_multipart_uploads(data.parent)]
    store.complete_multipart_upload(data, upload, [etag])
    seen["pending after"] = list(store.list_multipart_uploads(data.parent))
    seen["listed"] = {status.path.key: status.size for status in store.list_files(data.parent)}
    return seen


def test_served_stand_in_answers_as_the_in_process_one(tmp_path: Path) -> None:
    saved = FakeS3Client()
    S3Store(client=saved).write_bytes(StorePath.parse("s3://bench/out/_temporary/0/saved.json"), b"{}")
    saved.save(str(tmp_path / "objects.pickle"))

    in_process = _exercise(S3Store(client=FakeS3Client.load(str(tmp_path / "objects.pickle"))))
    with served_stand_in(str(tmp_path / "objects.pickle")) as client:
        served = _exercise(S3Store(client=client))
        memory = client.server_memory()

    assert served == in_process
    assert served["streamed"] == BODY
    assert served["range"] == BODY[CHUNK - 3 : CHUNK + 7]
    assert served["saved"] == b"{}"
    assert served["pending"] == ["out/part-00000.bin"]
    assert served["listed"] == {
        "out/_temporary/0/saved.json": 2,
        "out/_temporary/0/task-manifest.json": len(BODY),
    }
    assert memory["peak"] >= memory["baseline"] > 0

"""The `scale` scenario's instruments, checked against what they measure: the byte-counting store,
the in-process stand-in (`bench.fake_s3`) that keeps every record and lists in key order, and one
point on local files end to end."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

from airflow_commit_provider.core.paths import StorePath  # noqa: E402
from airflow_commit_provider.core.store.local import LocalStore  # noqa: E402
from airflow_commit_provider.core.store.s3 import S3Store  # noqa: E402
from bench.fake_s3 import FakeS3Client  # noqa: E402
from bench.scale_point import (  # noqa: E402
    PointSpec,
    count_bytes_read,
    measure_point,
    prepare,
)


def test_count_bytes_read_counts_each_read_once(tmp_path: Path) -> None:
    store = LocalStore()
    path = StorePath.parse(str(tmp_path / "file.json"))
    store.write_bytes(path, b"a" * 1000)
    counted = count_bytes_read(store)

    assert store.read_bytes(path) == b"a" * 1000
    assert store.read_bytes_within(path, 10) is None  # refused by its size: nothing returned
    assert store.read_bytes_within(path, 5000) == b"a" * 1000

    assert counted() == 2000


def _multipart_store(client: FakeS3Client) -> S3Store:
    """An S3Store that publishes a write stream over 1 MiB as a multipart upload of 1 MiB parts
    (64 MiB and 16 MiB on the real store: the same path, at a size a test can afford)."""
    store = S3Store(client=client)
    store.multipart_threshold = store.part_size = 1024**2
    return store


def test_stand_in_keeps_a_record_that_goes_up_as_a_multipart_upload(tmp_path: Path) -> None:
    # A `_SUCCESS` past the store's multipart threshold: the old format's at 1M files was about
    # 75 MB, uploaded in parts; the stand-in kept no parts, so the 1M-file point read no `_SUCCESS`.
    body = bytes(range(256)) * (3 * 1024**2 // 256 + 7)
    client = FakeS3Client()
    store = _multipart_store(client)
    path = StorePath.parse("s3://bench/out/_SUCCESS")
    with store.open_write(path) as stream:
        stream.write(body)
    assert store.statistics.counters.get("op_multipart_part") == 4
    client.save(str(tmp_path / "objects.pickle"))

    reloaded = S3Store(client=FakeS3Client.load(str(tmp_path / "objects.pickle")))
    assert reloaded.read_bytes(path) == body
    status = reloaded.get_status(path)
    assert status is not None and status.size == len(body)
    assert [listed.path for listed in reloaded.list_files(StorePath.parse("s3://bench/out"))] == [path]


def test_stand_in_keeps_no_data_body_of_a_multipart_upload() -> None:
    client = FakeS3Client()
    store = _multipart_store(client)
    with store.open_write(StorePath.parse("s3://bench/out/p=1/part-0.bin")) as stream:
        stream.write(b"x" * (2 * 1024**2 + 1))

    assert client.parts == {} and client.uploads == {} and client.objects == {}


def test_stand_in_lists_keys_and_uploads_in_key_order_whatever_the_order_of_creation(tmp_path: Path) -> None:
    client = FakeS3Client()
    store = S3Store(client=client)
    names = [f"out/{index * 7919 % 2500:04d}.json" for index in range(2500)]  # 2,500 keys, shuffled
    for name in names[:1500]:
        store.write_bytes(StorePath.parse(f"s3://bench/{name}"), b"{}")
    listed_first = [status.path.key for status in store.list_files(StorePath.parse("s3://bench/out"))]
    for name in names[1500:]:
        store.write_bytes(StorePath.parse(f"s3://bench/{name}"), b"{}")
    uploads = {
        store.create_multipart_upload(StorePath.parse(f"s3://bench/up/{i % 1300:04d}")) for i in range(2600)
    }
    client.save(str(tmp_path / "objects.pickle"))

    for reader in (store, S3Store(client=FakeS3Client.load(str(tmp_path / "objects.pickle")))):
        keys = [status.path.key for status in reader.list_files(StorePath.parse("s3://bench/out"))]
        pending = [
            (u.path.key, u.upload_id) for u in reader.list_multipart_uploads(StorePath.parse("s3://bench/up"))
        ]
        assert keys == sorted(names) and len(set(keys)) == 2500  # three pages, in key order
        assert pending == sorted(pending) and {upload for _, upload in pending} == uploads
    assert listed_first == sorted(names[:1500])


def test_a_local_point_measures_the_commit_it_made(tmp_path: Path) -> None:
    destination = tmp_path / "out"
    spec = PointSpec(
        committer="manifest",
        store="local",
        destination=StorePath.parse(str(destination)).uri(),
        job_id=f"job-{uuid.uuid4().hex[:12]}",
        files=60,
        tasks=4,
        partitions=3,
        work_dir=str(tmp_path),
        threads=4,
    )
    assert prepare(spec) == {"tasks": 4, "files": 60}

    measured = measure_point(spec)

    committed = sorted(p.relative_to(destination).as_posix() for p in destination.rglob("part-*.bin"))
    assert len(committed) == 60 and {name.split("/")[0] for name in committed} == {
        "p=00000",
        "p=00001",
        "p=00002",
    }
    success = (destination / "_SUCCESS").stat().st_size
    assert measured["success_bytes"] == success
    assert measured["poke_requests"] >= 1 and 0 < measured["poke_bytes"] <= success
    assert measured["poke_source"] == "_SUCCESS"
    assert measured["record_bytes"] > 0
    assert measured["report_listed_files"] == 60
    phases = measured["phases"]  # the job record's, of this commit: within its wall time
    assert phases and all(phase["end"] >= phase["start"] for phase in phases)
    assert phases[-1]["end"] - phases[0]["start"] <= measured["seconds"] * 1000 + 2
    assert measured["seconds"] > 0 and measured["rss_growth_bytes"] >= 0
    json.dumps(measured)  # what the child prints


def _curve_document(started_at: str, success_bytes: int) -> dict:
    from bench.scale import CurveResult, Level, PointValues

    point = PointValues(Level("files", "s3", 1000, 10, ("magic",)), "magic")
    point.ours.append(
        {
            "seconds": 1.5,
            "cpu_seconds": 0.5,
            "requests": 1010,
            "rss_growth_bytes": 3_000_000,
            "pyarrow_start_rss_bytes": 90_000_000,
            "success_bytes": success_bytes,
            "record_bytes": 2000,
            "lists_bytes": 0,
            "poke_bytes": success_bytes,
            "poke_requests": 1,
            "poke_source": "_SUCCESS",
            "report_page_seconds": 0.1,
            "phases": [
                {"name": "load manifests", "start": 0, "end": 1000, "requests": {"get": 32}},
                {"name": "complete uploads", "start": 1000, "end": 1500, "requests": {"complete": 1000}},
            ],
        }
    )
    point.raw.append((1.0, 0.4))
    result = CurveResult("scale", "The curve", "tiny", 1, points=[point.summary()])
    return {**result.to_json(), "started_at": started_at}


def test_the_report_shows_the_curve_beside_its_earlier_run(tmp_path: Path) -> None:
    from bench.report import write_report

    (tmp_path / "before").mkdir()
    (tmp_path / "scale.json").write_text(json.dumps(_curve_document("2026-12-01T00:00:00+00:00", 4_321)))
    (tmp_path / "before" / "scale.json").write_text(
        json.dumps(_curve_document("2026-11-28T00:00:00+00:00", 987_654))
    )

    report = write_report(tmp_path).read_text()

    after_row = "| files | magic | embedded S3 | 1,000 | 10 | 1.50 s | 1.00 s |"
    assert after_row in report and "| 4,321 |" in report and "| 1 | _SUCCESS |" in report
    assert "| magic | embedded S3 | 1,000 | load manifests | 1.00 s | 67% | 32 | get 32 |" in report
    before = report.index("Before (`before/scale.json`")
    assert "| 987,654 |" in report[before:] and "| 4,321 |" not in report[before:]
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

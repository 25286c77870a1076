"""The `scale` scenario's instruments, checked against what they measure: the byte-counting store,
the in-process stand-in that keeps every record, and one point on local files end to end."""

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
from bench.fake_s3 import KEEP_BYTES  # noqa: E402
from bench.scale_point import (  # noqa: E402
    KeepingFakeS3Client,
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


def test_keeping_stand_in_serves_back_bodies_over_the_stand_ins_limit(tmp_path: Path) -> None:
    body = bytes(range(256)) * (KEEP_BYTES // 256 + 10)
    client = KeepingFakeS3Client()
    store = S3Store(client=client)
    path = StorePath.parse("s3://bench/out/_temporary/pendingset.json")
    store.write_bytes(path, body)
    client.save(str(tmp_path / "objects.pickle"))

    reloaded = S3Store(client=KeepingFakeS3Client.load(str(tmp_path / "objects.pickle")))
    assert reloaded.read_bytes(path) == body


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
    assert measured["record_bytes"] > 0
    assert measured["report_listed_files"] == 60
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
            "success_bytes": success_bytes,
            "record_bytes": 2000,
            "lists_bytes": 0,
            "poke_bytes": success_bytes,
            "poke_requests": 1,
            "report_page_seconds": 0.1,
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
    assert after_row in report and "| 4,321 |" in report
    before = report.index("Before (`before/scale.json`")
    assert "| 987,654 |" in report[before:] and "| 4,321 |" not in report[before:]
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

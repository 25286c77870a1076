"""The `airflow-commit` CLI through `main([...])`: exit codes, JSON, prompts and one-line errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from cleanup_support import Terminal, assert_one_line_error, keys_under, run, start_upload, write_files

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3


@pytest.fixture
def no_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))


# uploads ----------------------------------------------------------------------------------
@pytest.mark.s3
def test_uploads_list_json_respects_the_directory_boundary(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str
) -> None:
    start_upload(s3_store, StorePath("s3", s3_bucket, "out/dataset1/part-0"), parts=2, size=50)
    start_upload(s3_store, StorePath("s3", s3_bucket, "out/dataset10/part-0"))
    url = f"s3a://{s3_bucket}/out/dataset1"
    code, out, err = run(
        capsys, "uploads", "list", url, "--older-than", "0s", "-o", "json", "--endpoint-url", s3_env
    )
    assert (code, err) == (0, "")
    listing = json.loads(out)
    assert [u["key"] for u in listing["uploads"]] == ["out/dataset1/part-0"]
    assert [u["path"] for u in listing["uploads"]] == [f"s3a://{s3_bucket}/out/dataset1/part-0"]
    assert (listing["bytes"], listing["parts"]) == (100, 2)
    code, out, _ = run(capsys, "uploads", "list", url, "--endpoint-url", s3_env)  # default: 24 h
    assert code == 0 and "0 pending uploads older than 1d" in out and "1 more recent" in out


@pytest.mark.s3
def test_uploads_abort_asks_and_refuses_without_a_terminal(
    capsys: pytest.CaptureFixture[str],
    s3_env: str,
    s3_store: S3Store,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    no_stdin: None,
) -> None:
    table = StorePath("s3", s3_bucket, "t")
    for i in range(3):
        start_upload(s3_store, table.join(f"f{i}"), size=10)
    url, common = f"s3://{s3_bucket}/t", ("--older-than", "0s", "--endpoint-url", s3_env)

    code, out, err = run(capsys, "uploads", "abort", url, *common)
    assert code == 2 and out == ""
    assert_one_line_error(err, "stdin is not a terminal", "--yes")
    assert len(list(s3_store.list_multipart_uploads(table))) == 3

    code, out, err = run(capsys, "uploads", "abort", url, *common, "--dry-run")
    assert (
        code == 0 and "Would abort 3 uploads" in out and ": 30 B in 3 parts; " in out and "(dry run)" in out
    )
    assert len(list(s3_store.list_multipart_uploads(table))) == 3

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = run(capsys, "uploads", "abort", url, *common)
    assert code == 1 and "Abort 3 uploads (size not measured)" in err and "Nothing aborted" in err
    assert len(list(s3_store.list_multipart_uploads(table))) == 3

    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = run(capsys, "uploads", "abort", url, *common, "--sizes")
    assert code == 0 and "Abort 3 uploads (30 B)" in err
    assert "Aborted 3 uploads" in out and ": 30 B in 3 parts; " in out
    assert list(s3_store.list_multipart_uploads(table)) == []


@pytest.mark.s3
def test_uploads_abort_yes_json(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str, no_stdin: None
) -> None:
    table = StorePath("s3", s3_bucket, "t")
    ids = {start_upload(s3_store, table.join(f"p={i}/f"), size=7) for i in range(4)}
    code, out, err = run(
        capsys,
        "uploads",
        "abort",
        f"s3://{s3_bucket}/t",
        "--older-than",
        "0s",
        "-y",
        "-o",
        "json",
        "--endpoint-url",
        s3_env,
    )
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["aborted"], report["failed"]) == (4, 0)
    assert (report["sizes_measured"], report["bytes"], report["parts"]) == (False, None, None)
    assert {u["upload_id"] for u in report["uploads"]} == ids
    assert {u["status"] for u in report["uploads"]} == {"aborted"}


@pytest.mark.s3
def test_uploads_abort_measures_sizes_only_with_the_flag_or_a_dry_run(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str, no_stdin: None
) -> None:
    table = StorePath("s3", s3_bucket, "t")
    url, common = f"s3://{s3_bucket}/t", ("--older-than", "0s", "--endpoint-url", s3_env)
    start_upload(s3_store, table.join("a"), parts=2, size=7)
    code, out, _ = run(capsys, "uploads", "abort", url, *common, "--dry-run", "-o", "json")
    assert (code, json.loads(out)["bytes"]) == (0, 14)
    code, out, _ = run(capsys, "uploads", "abort", url, *common, "--yes")
    assert code == 0 and "Aborted 1 uploads" in out and "sizes not measured (--sizes or" in out
    start_upload(s3_store, table.join("b"), parts=2, size=7)
    code, out, _ = run(capsys, "uploads", "abort", url, *common, "--yes", "--sizes", "-o", "json")
    report = json.loads(out)
    assert (code, report["aborted"], report["bytes"], report["parts"]) == (0, 1, 14, 2)
    assert list(s3_store.list_multipart_uploads(table)) == []
    assert main(["uploads", "abort", "--help"]) == 0
    assert "one more request per upload" in " ".join(capsys.readouterr().out.split())


# temp -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_temp_list_and_clean(
    kind: str, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, no_stdin: None
) -> None:
    if kind == "s3":
        endpoint = request.getfixturevalue("s3_env")
        store, bucket = request.getfixturevalue("s3_store"), request.getfixturevalue("s3_bucket")
        root, extra = StorePath("s3", bucket, "lake/t"), ["--endpoint-url", endpoint]
    else:
        store, root, extra = LocalStore(), StorePath.parse(str(request.getfixturevalue("tmp_path") / "t")), []
    write_files(store, root, ["_temporary/j1/00/a", "__magic_job-j2/b", "data/part-0"])
    url = str(root)
    code, out, _ = run(capsys, "temp", "list", url, *extra)
    assert code == 0 and "2 temporary trees" in out and "0 stale" in out and "active" in out
    code, out, _ = run(capsys, "temp", "list", url, "--older-than", "0s", "-o", "json", *extra)
    listing = json.loads(out)
    assert (code, listing["count"], listing["stale"], listing["stale_bytes"]) == (0, 2, 2, 20)
    assert sorted(t["path"] for t in listing["trees"]) == [
        str(root.join("__magic_job-j2")),
        str(root.join("_temporary/j1")),
    ]

    code, out, err = run(capsys, "temp", "clean", url, "--older-than", "0s", *extra)
    assert code == 2
    assert_one_line_error(err, "refusing to delete temporary trees")
    code, out, _ = run(capsys, "temp", "clean", url, "--older-than", "0s", "--dry-run", *extra)
    assert code == 0 and "Would delete 2 stale temporary trees" in out
    assert len(keys_under(store, root)) == 3
    code, out, _ = run(capsys, "temp", "clean", url, "--older-than", "0s", "--yes", "-o", "json", *extra)
    report = json.loads(out)
    assert (code, report["deleted"], report["files"]) == (0, 2, 2)
    assert {t["status"] for t in report["trees"]} == {"deleted"}
    assert keys_under(store, root) == {"data/part-0"}


# success ----------------------------------------------------------------------------------
def _write_success(store: LocalStore | S3Store, directory: StorePath, **overrides: object) -> SuccessData:
    values: dict[str, object] = {
        "committer": "magic",
        "job_id": "job-42",
        "file_count": 3,
        "total_bytes": 2048,
        "rows": 10,
        "partitions": ["day=1", "day=2"],
    }
    values.update(overrides)
    data = SuccessData(**values)  # type: ignore[arg-type]
    store.write_bytes(directory.join("_SUCCESS"), data.to_bytes())
    return data


def test_success_show_and_verify_local(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = StorePath.parse(str(tmp_path / "out"))
    _write_success(LocalStore(), out_dir)
    for url in (str(tmp_path / "out"), f"file://{tmp_path}/out/_SUCCESS"):
        code, out, _ = run(capsys, "success", "show", url)
        assert code == 0 and "job-42" in out and "magic" in out and "2.0 KiB" in out
    code, out, _ = run(capsys, "success", "show", str(tmp_path / "out"), "-o", "json")
    shown = json.loads(out)
    assert (shown["job_id"], shown["files"], shown["legacy"]) == ("job-42", 3, False)
    code, out, _ = run(capsys, "success", "show", str(tmp_path / "out"), "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == shown, "-o yaml is the same record as -o json"
    assert shown["path"] == str(out_dir.join("_SUCCESS"))

    ok = ("success", "verify", str(tmp_path / "out"))
    code, out, _ = run(capsys, *ok, "--job-id", "job-42", "--committer", "staging", "--committer", "magic")
    assert code == 0 and out.startswith("OK ")
    code, out, _ = run(capsys, *ok, "--min-files", "3", "--partition", "day=2", "--newer-than", "1h")
    assert code == 0
    code, out, _ = run(capsys, *ok, "--job-id", "job-7", "--min-files", "5", "--committer", "directory")
    assert code == 1 and out.startswith("FAILED")
    assert "job ID is 'job-42', expected 'job-7'" in out
    assert "3 files committed, expected at least 5" in out
    assert "committer is 'magic', expected 'directory'" in out
    assert "no record of job 'job-7' at " in out, "the job's own record was looked for too"
    code, out, _ = run(capsys, *ok, "--job-id", "job-7", "-o", "json")
    verdict = json.loads(out)
    assert (code, verdict["ok"], len(verdict["reasons"])) == (1, False, 2)


def test_success_missing_corrupt_and_legacy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "success", "show", str(tmp_path / "nothing"))
    assert code == 2
    assert_one_line_error(err, "no _SUCCESS at")
    code, out, _ = run(capsys, "success", "verify", str(tmp_path / "nothing"))
    assert code == 1 and "no _SUCCESS at" in out

    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "_SUCCESS").write_text("{not json")
    code, out, _ = run(capsys, "success", "verify", str(tmp_path / "corrupt"))
    assert code == 1 and "unreadable: " in out and "corrupt/_SUCCESS: not valid JSON" in out
    code, _, err = run(capsys, "success", "show", str(tmp_path / "corrupt"))
    assert code == 2
    assert_one_line_error(err, "_SUCCESS")

    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "_SUCCESS").write_bytes(b"")
    code, out, _ = run(capsys, "success", "show", str(tmp_path / "legacy"))
    assert code == 0 and "legacy 0-byte marker" in out
    code, out, _ = run(capsys, "success", "verify", str(tmp_path / "legacy"))
    assert code == 1 and "--allow-legacy" in out
    code, out, _ = run(capsys, "success", "verify", str(tmp_path / "legacy"), "--allow-legacy")
    assert code == 0
    code, out, _ = run(
        capsys, "success", "verify", str(tmp_path / "legacy"), "--allow-legacy", "--job-id", "j"
    )
    assert code == 1 and "records no job ID" in out


@pytest.mark.s3
def test_success_verify_on_s3(
    capsys: pytest.CaptureFixture[str], s3_env: str, s3_store: S3Store, s3_bucket: str
) -> None:
    _write_success(s3_store, StorePath("s3", s3_bucket, "out/t"), job_id="abc")
    for url in (f"s3://{s3_bucket}/out/t", f"s3a://{s3_bucket}/out/t/_SUCCESS"):
        code, out, _ = run(capsys, "success", "verify", url, "--job-id", "abc", "--endpoint-url", s3_env)
        assert code == 0, out
    code, out, _ = run(capsys, "success", "verify", f"s3://{s3_bucket}/out/t10", "--endpoint-url", s3_env)
    assert code == 1 and "no _SUCCESS" in out


# errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["uploads", "list", "s3://b/t", "--older-than", "5x"], ["--older-than", "invalid duration '5x'"]),
        (["uploads", "list", "s3://b"], ["SCOPE: 's3://b' has an empty prefix", "--allow-bucket-root"]),
        (["records", "list", "s3://b"], ["DESTINATION: 's3://b' has an empty prefix"]),
        (["records", "reindex", "s3://b/t*"], ["DESTINATION: 's3://b/t*' has wildcards"]),
        (["uploads", "abort", "s3://b/", "--yes"], ["empty prefix"]),
        (["temp", "clean", "s3:b/t", "--yes"], ["cannot parse"]),
        (["temp", "list", "s3:///t"], ["no bucket"]),
        (["uploads", "list", "gs://b/t"], ["unsupported scheme"]),
        (["uploads", "purge", "s3://b/t"], ["invalid choice"]),
        (["uploads"], ["required"]),
        (["success", "verify"], ["required: DESTINATION"]),
        (["uploads", "list", "s3://b/t", "--threads", "0"], ["--threads"]),
    ],
)
def test_errors_are_one_line_with_status_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, *fragments)


@pytest.mark.s3
def test_store_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    embedded_s3: EmbeddedS3,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    argv = ["uploads", "list", "s3://bucket/t", "--endpoint-url", embedded_s3.endpoint_url]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, "credentials")


def test_help_and_no_progress_bars_when_not_a_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_info:  # argparse's own --help path exits 0 through main
        raise SystemExit(main(["--help"]))
    assert exit_info.value.code == 0
    out, _ = capsys.readouterr()
    assert "uploads" in out and "success" in out
    write_files(LocalStore(), StorePath.parse(str(tmp_path)), ["_temporary/j/f"])
    code, out, err = run(capsys, "temp", "list", str(tmp_path), "--older-than", "0s")
    assert code == 0 and err == "" and "\x1b[" not in out

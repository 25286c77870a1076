"""Know the store before trusting it: `airflow-commit doctor`, and committers refusing a store that
ignores ``If-None-Match: *``.

The honest store is the embedded SeaweedFS; the dishonest one is the same server behind
`IfNoneMatchIgnoringProxy`, a real loopback proxy that makes every conditional PUT unconditional
(re-signed, as a store that ignores the header still authenticates it). `S3Gate` is the same
forwarding without any change, used to count the requests a probe makes.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.ignoring_store import IfNoneMatchIgnoringProxy, ignoring_proxy_fixture  # noqa: F401
from support.s3_gate import Request, S3Gate

from airflow_commit_provider import cli
from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import StoreError
from airflow_commit_provider.core.store.check import (
    CONDITIONAL_CREATE,
    CONDITIONAL_CREATE_ENV,
    SCRATCH_PREFIX,
    UntrustedStoreError,
)
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.store_doctor import COMMIT_PROPERTIES, PROPERTIES

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

#: The committers that can run on S3; every one commits through the outcome file.
S3_COMMITTERS = ("magic", "directory", "partitioned")


@pytest.fixture
def aws_environment(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI takes credentials from boto3's environment, as a user's shell gives them."""
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(CONDITIONAL_CREATE_ENV, raising=False)


def store_at(embedded_s3: EmbeddedS3, endpoint_url: str, **options: object) -> S3Store:
    return S3Store(
        endpoint_url=endpoint_url,
        aws_access_key_id=embedded_s3.access_key,
        aws_secret_access_key=embedded_s3.secret_key,
        region_name=embedded_s3.region,
        **options,  # type: ignore[arg-type]
    )


def everything_in(embedded_s3: EmbeddedS3, bucket: str) -> tuple[list[str], list[str]]:
    """Every key and every pending upload in the bucket, read directly from the server."""
    with embedded_s3.store().session() as store:
        root = StorePath("s3", bucket, "")
        keys = sorted(status.path.key for status in store.list_files(root))
        uploads = sorted(upload.path.key for upload in store.list_multipart_uploads(root))
    return keys, uploads


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = cli.main(["doctor", *argv, "--rounds", "1", "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def verdicts(report: dict[str, object]) -> dict[str, bool]:
    return {check["property"]: check["ok"] for check in report["checks"]}  # type: ignore[index, union-attr]


def test_doctor_passes_on_the_embedded_s3_and_leaves_only_what_was_there(
    embedded_s3: EmbeddedS3, s3_bucket: str, aws_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with embedded_s3.store().session() as store:
        for key in ("dest/part-0.csv", "dest/_SUCCESS", "dest0/x", "other/y"):
            store.write_bytes(StorePath("s3", s3_bucket, key), b"kept")
    before = everything_in(embedded_s3, s3_bucket)

    code = cli.main(
        ["doctor", f"s3://{s3_bucket}/dest", "--endpoint-url", embedded_s3.endpoint_url, "--rounds", "1"]
    )
    out = capsys.readouterr().out

    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert [line.split()[:2] for line in lines] == [["PASS", name] for name in PROPERTIES]
    assert f"{embedded_s3.endpoint_url}, bucket {s3_bucket}" in out
    assert "400 EntityTooSmall" in out, "the part-size rule is reported as the store applies it"
    assert embedded_s3.secret_key not in out and embedded_s3.access_key not in out
    assert everything_in(embedded_s3, s3_bucket) == before


def test_doctor_reports_a_store_that_ignores_if_none_match(
    embedded_s3: EmbeddedS3,
    s3_bucket: str,
    aws_environment: None,
    ignoring_proxy: IfNoneMatchIgnoringProxy,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = doctor(capsys, f"s3://{s3_bucket}/dest", "--endpoint-url", ignoring_proxy.endpoint_url)

    assert code == 1
    assert verdicts(report) == {name: name not in COMMIT_PROPERTIES for name in PROPERTIES}
    reasons = {check["property"]: check["reason"] for check in report["checks"]}  # type: ignore[index, union-attr]
    assert "ignores the header" in reasons[CONDITIONAL_CREATE]
    assert "8 of 8 concurrent creates" in reasons["concurrent-create"]
    assert ignoring_proxy.rewritten >= 2, "the conditional PUTs really reached the server unconditionally"
    assert everything_in(embedded_s3, s3_bucket) == ([], [])

    code = cli.main(["doctor", f"s3://{s3_bucket}/dest", "--endpoint-url", ignoring_proxy.endpoint_url])
    out = capsys.readouterr().out
    assert code == 1
    assert f"FAIL  {CONDITIONAL_CREATE}  " in out and "job setup refuses a store" in out


@pytest.mark.parametrize("fault", ["missing bucket", "wrong secret"])
def test_doctor_fails_the_endpoint_without_printing_secrets(
    embedded_s3: EmbeddedS3,
    s3_bucket: str,
    aws_environment: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fault: str,
) -> None:
    bucket = s3_bucket
    wrong_secret = f"not-{embedded_s3.secret_key}"
    if fault == "missing bucket":
        bucket = f"missing-{uuid.uuid4().hex[:12]}"
    else:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong_secret)

    code = cli.main(["doctor", f"s3://{bucket}/dest", "--endpoint-url", embedded_s3.endpoint_url])
    captured = capsys.readouterr()

    assert code == 1
    lines = [line for line in captured.out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert lines[0].startswith("FAIL  endpoint  ")
    assert ("NoSuchBucket" if fault == "missing bucket" else "SignatureDoesNotMatch") in lines[0]
    assert all("not checked: the endpoint is not usable" in line for line in lines[1:])
    for secret in (embedded_s3.secret_key, wrong_secret):
        assert secret not in captured.out + captured.err
    assert everything_in(embedded_s3, s3_bucket) == ([], [])


def test_doctor_on_a_local_directory_says_why_it_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    destination = tmp_path / "out"
    destination.mkdir()
    (destination / "part-0.csv").write_text("kept")

    code, report = doctor(capsys, destination.as_uri())

    assert code == 0
    assert all(verdicts(report).values())
    assert "O_EXCL" in str(report["note"])
    assert [path.name for path in destination.iterdir()] == ["part-0.csv"]


@pytest.mark.parametrize("committer", S3_COMMITTERS)
def test_committers_refuse_a_store_that_ignores_if_none_match(
    embedded_s3: EmbeddedS3, s3_bucket: str, ignoring_proxy: IfNoneMatchIgnoringProxy, committer: str
) -> None:
    destination = StorePath("s3", s3_bucket, "out")
    with store_at(embedded_s3, ignoring_proxy.endpoint_url, conditional_create="check").session() as store:
        job = create_committer(committer, store, destination, f"job-{uuid.uuid4().hex[:8]}")
        with pytest.raises(UntrustedStoreError) as refused:
            job.setup_job()

    message = str(refused.value)
    assert "\n" not in message
    assert f"{ignoring_proxy.endpoint_url}, bucket {s3_bucket}" in message
    assert f"fails {CONDITIONAL_CREATE}:" in message and f"the {committer} committer" in message
    assert f"{CONDITIONAL_CREATE_ENV}=trusted" in message
    assert everything_in(embedded_s3, s3_bucket) == ([], []), "refused before any work, probe removed"


def test_a_store_declared_trusted_is_not_probed(
    embedded_s3: EmbeddedS3, s3_bucket: str, ignoring_proxy: IfNoneMatchIgnoringProxy
) -> None:
    """The explicit way out, as Hadoop's ``fs.s3a.create.conditional.enabled``: the user vouches."""
    destination = StorePath("s3", s3_bucket, "out")
    with store_at(embedded_s3, ignoring_proxy.endpoint_url, conditional_create="trusted").session() as store:
        job = create_committer("magic", store, destination, "trusted-job")
        job.setup_job()
        job.abort_job("test over")
    assert not [request for request in ignoring_proxy.requests if SCRATCH_PREFIX in request.target]


def probes(requests: list[Request]) -> int:
    """Probes seen: each creates its one scratch key twice, with If-None-Match."""
    scratch_puts = [r for r in requests if SCRATCH_PREFIX in r.target and r.method == "PUT"]
    assert all("if-none-match" in r.headers for r in scratch_puts)
    assert len(scratch_puts) % 2 == 0
    return len(scratch_puts) // 2


def test_one_probe_per_endpoint_and_bucket_per_process(
    embedded_s3: EmbeddedS3, s3_bucket: str, ignoring_proxy: IfNoneMatchIgnoringProxy
) -> None:
    second_bucket = embedded_s3.create_bucket(f"test-{uuid.uuid4().hex[:20]}")
    try:
        with S3Gate(embedded_s3.endpoint_url) as gate:
            for bucket, job_id, expected in (
                (s3_bucket, "a", 1),
                (s3_bucket, "b", 1),
                (second_bucket, "c", 2),
            ):
                with store_at(
                    embedded_s3, gate.endpoint_url
                ).session() as store:  # a new store (and client) each time
                    job = create_committer("magic", store, StorePath("s3", bucket, f"out-{job_id}"), job_id)
                    job.setup_job()
                    job.abort_job("test over")
                assert probes(gate.requests) == expected, f"job {job_id}"
            probe_requests = [r for r in gate.requests if SCRATCH_PREFIX in r.target]
            assert len(probe_requests) == 4, "2 conditional PUTs per probe (plus one DeleteObjects each)"

        for attempt in range(2):  # a failing answer is cached too
            with store_at(embedded_s3, ignoring_proxy.endpoint_url).session() as store:
                job = create_committer(
                    "directory", store, StorePath("s3", s3_bucket, "refused"), f"r{attempt}"
                )
                with pytest.raises(UntrustedStoreError):
                    job.setup_job()
            assert probes(ignoring_proxy.requests) == 1
    finally:
        embedded_s3.delete_bucket(second_bucket)


def test_a_bad_conditional_create_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreError, match=r"^conditional_create='sometimes': must be one of check, trusted$"):
        S3Store(conditional_create="sometimes")
    monkeypatch.setenv(CONDITIONAL_CREATE_ENV, "yes")
    with pytest.raises(StoreError, match=rf"^{CONDITIONAL_CREATE_ENV}='yes'"):
        S3Store()

"""CommitStoreHook: Airflow AWS connections become core stores; secrets stay out of sight."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import StoreError
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.hooks import CommitStoreHook
from airflow_commit_provider.spark.write_options import resolve_s3_settings


def test_local_paths_need_no_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lookup(*_: object, **__: object) -> None:
        raise AssertionError("a local path must not look a connection up")

    monkeypatch.setattr(CommitStoreHook, "get_connection", classmethod(no_lookup))
    hook = CommitStoreHook(aws_conn_id="does_not_exist")
    for url in (str(tmp_path), f"file://{tmp_path}"):
        store = hook.get_store(url)
        assert isinstance(store, LocalStore)
        store.write_bytes(StorePath.parse(url).join("a.txt"), b"x")
    assert (tmp_path / "a.txt").read_bytes() == b"x"
    assert hook.spark_environment(str(tmp_path)) == {}


def test_s3_store_from_aws_default(aws_default: EmbeddedS3, s3_bucket: str) -> None:
    hook = CommitStoreHook()
    store = hook.get_store(f"s3://{s3_bucket}/t")
    assert isinstance(store, S3Store)
    assert store.endpoint_url == aws_default.endpoint_url
    assert store.region_name == aws_default.region
    path = StorePath("s3", s3_bucket, "t/hello.txt")
    store.write_bytes(path, b"hello")
    assert store.read_bytes(path) == b"hello"
    store.close()
    env = hook.spark_environment(f"s3a://{s3_bucket}/t")
    assert env == {
        "AWS_ENDPOINT_URL": aws_default.endpoint_url,
        "AWS_DEFAULT_REGION": aws_default.region,
        "AWS_ACCESS_KEY_ID": aws_default.access_key,
        "AWS_SECRET_ACCESS_KEY": aws_default.secret_key,
    }


def test_service_endpoint_wins_over_global(
    embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch, no_aws_env: None
) -> None:
    set_connection(
        monkeypatch,
        "my_s3",
        embedded_s3,
        endpoint_url="http://127.0.0.1:1",
        service_config={"s3": {"endpoint_url": embedded_s3.endpoint_url}},
        region_name="eu-west-3",
    )
    settings = CommitStoreHook(aws_conn_id="my_s3").s3_settings
    assert settings.endpoint_url == embedded_s3.endpoint_url
    assert settings.region_name == "eu-west-3"
    assert (
        CommitStoreHook(aws_conn_id="my_s3", region_name="us-west-1").s3_settings.region_name == "us-west-1"
    )


@pytest.mark.parametrize("verify", [False, "/etc/ssl/certs/ca-certificates.crt"])
def test_verify_extra_reaches_the_store_and_the_spark_job(
    embedded_s3: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, verify: bool | str
) -> None:
    set_connection(monkeypatch, "tls_s3", embedded_s3, region_name=embedded_s3.region, verify=verify)
    hook = CommitStoreHook(aws_conn_id="tls_s3")
    store = hook.get_store(f"s3://{s3_bucket}/v")
    assert isinstance(store, S3Store)
    assert store.verify == verify
    # boto3 skips verification only for verify=False and uses a bundle path as given (plain http here).
    assert store.client._endpoint.http_session._verify == verify
    store.write_bytes(StorePath("s3", s3_bucket, "v/f"), b"1")
    environment = hook.spark_environment(f"s3://{s3_bucket}/v")
    assert environment.get("AWS_CA_BUNDLE") == (verify or None)
    # ... and the Spark job's writer resolves the same setting from that environment
    job_settings = S3Settings.from_text({}, environment)
    assert job_settings.verify == verify
    assert job_settings.store_kwargs()["verify"] == verify


def test_connection_in_uri_form(
    embedded_s3: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from urllib.parse import quote

    uri = (
        f"aws://{quote(embedded_s3.access_key, safe='')}:{quote(embedded_s3.secret_key, safe='')}@/"
        f"?region_name={embedded_s3.region}&endpoint_url={quote(embedded_s3.endpoint_url, safe='')}"
    )
    monkeypatch.setenv("AIRFLOW_CONN_URI_S3", uri)
    store = CommitStoreHook(aws_conn_id="uri_s3").get_store(f"s3://{s3_bucket}/x")
    store.write_bytes(StorePath("s3", s3_bucket, "x/f"), b"1")
    assert [s.path.name for s in store.list_files(StorePath("s3", s3_bucket, "x"))] == ["f"]


def test_no_connection_uses_boto_defaults(
    embedded_s3: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, no_aws_env: None
) -> None:
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    store = CommitStoreHook(aws_conn_id=None).get_store(f"s3://{s3_bucket}/d")
    store.write_bytes(StorePath("s3", s3_bucket, "d/f"), b"1")
    assert store.read_bytes(StorePath("s3", s3_bucket, "d/f")) == b"1"


def test_missing_credentials_fail_with_a_clear_error(
    embedded_s3: EmbeddedS3,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    no_aws_env: None,
    tmp_path: Path,
) -> None:
    # Nothing in the chain: no connection credentials, no env, no shared files, no instance metadata.
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    conn = {"conn_type": "aws", "extra": {"endpoint_url": embedded_s3.endpoint_url}}
    monkeypatch.setenv("AIRFLOW_CONN_ANON", json.dumps(conn))
    store = CommitStoreHook(aws_conn_id="anon").get_store(f"s3://{s3_bucket}/d")
    with pytest.raises(StoreError, match="no usable AWS credentials"):
        store.read_bytes(StorePath("s3", s3_bucket, "d/f"))


def test_secrets_never_logged_or_shown(
    aws_default: EmbeddedS3, s3_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.sdk.log import redact  # the masker task logs go through

    secret = aws_default.secret_key
    caplog.set_level(logging.DEBUG)
    hook = CommitStoreHook()
    store = hook.get_store(f"s3://{s3_bucket}/t")
    store.write_bytes(StorePath("s3", s3_bucket, "t/x"), b"x")
    settings = hook.s3_settings
    for text in (repr(hook), repr(settings), repr(store), str(store), caplog.text):
        assert secret not in text
    assert settings.aws_secret_access_key == secret
    # Registered with Airflow's masker, so task logs would show *** instead.
    assert secret not in str(redact(f"the key is {secret}"))


def test_region_verify_and_botocore_config_reach_the_store_and_the_spark_job(
    embedded_s3: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, no_aws_env: None
) -> None:
    """The Amazon provider's hook arguments win over the connection's, as in its own hooks, and
    reach the store's client, a real request and the Spark job's settings."""
    set_connection(
        monkeypatch,
        "tuned_s3",
        embedded_s3,
        region_name="eu-west-3",
        verify=False,
        config_kwargs={"read_timeout": 11},
    )
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    hook = CommitStoreHook(
        aws_conn_id="tuned_s3",
        region_name="us-west-1",
        verify=bundle,
        config={"connect_timeout": 7, "retries": {"max_attempts": 2}},
    )
    url = f"s3://{s3_bucket}/tuned"
    store = hook.get_store(url)
    assert isinstance(store, S3Store)
    assert (store.region_name, store.client.meta.region_name) == ("us-west-1", "us-west-1")
    assert store.client._endpoint.http_session._verify == bundle
    config = store.client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (7, 60), "the hook's config replaces the extra's"
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    store.write_bytes(StorePath("s3", s3_bucket, "tuned/f"), b"1")
    store.close()

    environment = hook.spark_environment(url)
    assert environment["AWS_DEFAULT_REGION"] == "us-west-1"
    assert environment["AWS_CA_BUNDLE"] == bundle
    assert json.loads(environment["AIRFLOW_COMMIT_S3_BOTOCORE_CONFIG"]) == {
        "connect_timeout": 7,
        "retries": {"max_attempts": 2},
    }
    # The Spark job's writer resolves the very settings the hook used, and its store reads the file.
    job_settings = resolve_s3_settings({}, NoSparkConf(), environment)
    assert job_settings == hook.s3_settings
    job_store = S3Store(**job_settings.store_kwargs())
    assert job_store.client.meta.config.connect_timeout == 7
    assert job_store.read_bytes(StorePath("s3", s3_bucket, "tuned/f")) == b"1"
    job_store.close()

    # Without arguments the connection's extras apply, config_kwargs included.
    plain = CommitStoreHook(aws_conn_id="tuned_s3").get_store(url)
    assert isinstance(plain, S3Store)
    assert (plain.region_name, plain.verify, plain.client.meta.config.read_timeout) == (
        "eu-west-3",
        False,
        11,
    )
    assert plain.read_bytes(StorePath("s3", s3_bucket, "tuned/f")) == b"1"
    plain.close()


class NoSparkConf:
    def get(self, key: str) -> None:
        return None


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, s3: EmbeddedS3, **extra: Any) -> None:
    """An Airflow AWS connection with the embedded server's credentials and endpoint (``extra`` over it)."""
    conn = {
        "conn_type": "aws",
        "login": s3.access_key,
        "password": s3.secret_key,
        "extra": {"endpoint_url": s3.endpoint_url, **extra},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))

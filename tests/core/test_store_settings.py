"""S3Settings and HdfsSettings: what reaches their stores, and a child process's environment, and back."""

from __future__ import annotations

import getpass

import pytest
from botocore import UNSIGNED

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import StoreError
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.core.store.settings import ENV_S3_BOTOCORE_CONFIG, HdfsSettings, S3Settings

TUNED = S3Settings(
    endpoint_url="http://127.0.0.1:1",
    aws_access_key_id="AKIDTEST",
    aws_secret_access_key="very-secret",
    aws_session_token="token-secret",
    region_name="eu-north-1",
    verify="/etc/ssl/certs/ca-certificates.crt",
    request_path="boto3",
    conditional_create="trusted",
    botocore_config={"connect_timeout": 7, "retries": {"max_attempts": 3}, "proxies": {"https": "p"}},
)


@pytest.mark.parametrize(
    "settings",
    [TUNED, S3Settings(verify=False, botocore_config={"signature_version": "unsigned"}), S3Settings()],
    ids=["every-field", "verify-off-unsigned", "defaults"],
)
def test_a_child_process_reads_back_what_the_environment_carries(settings: S3Settings) -> None:
    assert S3Settings.from_text({}, settings.environment()) == settings


def test_given_values_win_over_the_environment() -> None:
    environ = TUNED.environment()
    settings = S3Settings.from_text(
        {"region_name": "us-east-2", "botocore_config": '{"read_timeout": 5}'}, environ
    )
    assert settings.region_name == "us-east-2"
    assert settings.botocore_config == {"read_timeout": 5}
    assert settings.endpoint_url == TUNED.endpoint_url


@pytest.mark.parametrize(
    ("given", "environ", "message"),
    [
        ({}, {ENV_S3_BOTOCORE_CONFIG: "{not json"}, f"^{ENV_S3_BOTOCORE_CONFIG} must be a JSON object"),
        ({}, {ENV_S3_BOTOCORE_CONFIG: "[1]"}, f"^{ENV_S3_BOTOCORE_CONFIG} must be a JSON object"),
        ({"botocore_config": '{"conect_timeout": 1}'}, {}, "^botocore_config: conect_timeout not botocore"),
    ],
)
def test_bad_botocore_config_is_refused_in_one_line_naming_its_source(
    given: dict[str, str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        S3Settings.from_text(given, environ)


def test_a_botocore_config_that_is_not_json_cannot_reach_a_job() -> None:
    with pytest.raises(ValueError, match=r"^botocore_config must be JSON to reach a Spark job"):
        S3Settings(botocore_config={"connect_timeout": object()}).environment()


def test_repr_shows_no_secret() -> None:
    text = repr(TUNED)
    for secret in ("very-secret", "token-secret", "AKIDTEST", "proxies"):
        assert secret not in text


def test_botocore_config_wins_over_the_stores_defaults() -> None:
    store = S3Store(**TUNED.store_kwargs())
    config = store.client.meta.config
    assert config.connect_timeout == 7
    assert config.proxies == {"https": "p"}
    # The store's own choices stay where the user said nothing: standard retries, path style, pool.
    assert config.retries == {"mode": "standard", "total_max_attempts": 4}
    assert config.s3 == {"addressing_style": "path"}
    assert config.max_pool_connections == store.max_pool_connections
    assert store.region_name == "eu-north-1" and store.client.meta.region_name == "eu-north-1"
    store.close()
    anonymous = S3Store(endpoint_url="http://127.0.0.1:1", botocore_config={"signature_version": "unsigned"})
    assert anonymous.client.meta.config.signature_version is UNSIGNED
    anonymous.close()


def test_an_unknown_botocore_option_given_to_the_store_fails_in_one_line() -> None:
    store = S3Store(endpoint_url="http://127.0.0.1:1", botocore_config={"conect_timeout": 1})
    with pytest.raises(StoreError, match=r"^botocore_config is not a botocore Config: .*conect_timeout"):
        store.get_status(StorePath("s3", "bucket", "key"))


def test_botocore_options_the_crt_would_not_follow_keep_the_hot_calls_on_boto3() -> None:
    """A proxy or a timeout applies to every request: `auto` sends the hot calls through boto3
    then, and `crt` is refused in one line naming the options."""
    pytest.importorskip("awscrt")
    credentials = {"aws_access_key_id": "AKIDTEST", "aws_secret_access_key": "secret"}
    endpoint = "http://127.0.0.1:1"
    follows = S3Store(endpoint_url=endpoint, botocore_config={"retries": {"max_attempts": 2}}, **credentials)
    proxied = S3Store(endpoint_url=endpoint, botocore_config={"proxies": {"http": "p:1"}}, **credentials)
    try:
        assert follows.hot.name == "crt"
        assert proxied.hot.name == "boto3"
    finally:
        follows.close()
        proxied.close()
    refused = S3Store(
        endpoint_url=endpoint,
        request_path="crt",
        botocore_config={"read_timeout": 5, "proxies": {}},
        **credentials,
    )
    with pytest.raises(
        StoreError, match=r"^request_path='crt' cannot follow botocore_config's proxies, read_timeout"
    ):
        _ = refused.hot  # the request path is chosen before the first hot call


def test_webhdfs_address_from_the_setting_or_the_client_conf(tmp_path: object) -> None:
    """The NameNode's HTTP address is not in an hdfs:// URI (that is its RPC port): the setting,
    else the client conf's dfs.namenode.http-address for the default filesystem's NameNode, a bind
    address (0.0.0.0) read as the NameNode's host; any other NameNode is refused naming both ways."""
    assert (
        HdfsSettings(webhdfs_url="http://nn:9870/").webhdfs_base("other:8020") == "http://nn:9870/webhdfs/v1"
    )
    sites = {
        "core-site.xml": ("fs.defaultFS", "hdfs://nn.example:8020"),
        "hdfs-site.xml": ("dfs.namenode.http-address", "0.0.0.0:9870"),
    }
    for name, (key, value) in sites.items():
        with open(f"{tmp_path}/{name}", "w", encoding="utf-8") as site:
            site.write(
                f"<configuration><property><name>{key}</name><value>{value}</value></property></configuration>"
            )
    environ = {"HADOOP_CONF_DIR": str(tmp_path)}
    assert HdfsSettings().webhdfs_base("nn.example:8020", environ) == "http://nn.example:9870/webhdfs/v1"
    with pytest.raises(
        ValueError, match=r"^no WebHDFS address for hdfs://other:8020: set AIRFLOW_COMMIT_WEBHDFS_URL"
    ):
        HdfsSettings().webhdfs_base("other:8020", environ)


def test_hdfs_settings_reach_a_child_process_and_back() -> None:
    settings = HdfsSettings(webhdfs_url="http://nn:9870", user="etl")
    assert HdfsSettings.from_environment(settings.environment()) == settings
    assert HdfsSettings.from_environment({}).user_name() == getpass.getuser()

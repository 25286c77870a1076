"""Airflow connections turned into the core's stores.

``file://`` paths (and plain local ones) need no connection. ``s3://`` / ``s3a://`` paths use
an AWS connection in the ``aws_default`` style of the Amazon provider, through its own connection
handling: the hook *is* an :class:`~airflow.providers.amazon.aws.hooks.base_aws.AwsBaseHook`, so it
takes the same ``aws_conn_id``, ``region_name``, ``verify`` and ``config`` (botocore) as every hook
of the Amazon provider, and the connection's login/password or the default credential chain,
``profile_name``, ``role_arn`` (assumed roles), ``region_name``, ``endpoint_url``
(``service_config.s3.endpoint_url`` wins over the global one), ``verify`` and ``config_kwargs``.
All of them reach the core's S3 store and a Spark job's environment.

The secret parts of the credentials are registered with Airflow's secrets masker as soon as they are
read, and never appear in logs, ``repr`` or XCom.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
from botocore import UNSIGNED
from botocore.config import Config

from airflow_commit_provider.core.paths import S3_SCHEMES, StorePath
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.core.store.settings import UNSIGNED_SIGNATURE, S3Settings

if TYPE_CHECKING:
    from airflow_commit_provider.core.store import Store

__all__ = ["CommitStoreHook"]


class CommitStoreHook(AwsBaseHook):
    """Opens core stores (:func:`~airflow_commit_provider.core.store.open_store`) for Airflow tasks.

    :param aws_conn_id: the AWS connection for ``s3://`` paths (Amazon provider's ``aws`` type).
        ``None`` uses boto3's default configuration without looking a connection up.
    :param region_name: overrides the connection's ``region_name``.
    :param verify: overrides the connection's ``verify``: False, or a CA bundle path.
    :param config: botocore ``Config`` (or its options) over the connection's ``config_kwargs``.
    :param threads: sizes the S3 connection pool for commit/abort thread pools.
    """

    hook_name = "Commit Protocols store"

    def __init__(
        self,
        aws_conn_id: str | None = AwsBaseHook.default_conn_name,
        *,
        region_name: str | None = None,
        verify: bool | str | None = None,
        config: Config | dict[str, Any] | None = None,
        threads: int = 32,
    ) -> None:
        super().__init__(
            aws_conn_id=aws_conn_id, region_name=region_name, verify=verify, config=config, client_type="s3"
        )
        self.threads = threads

    def __repr__(self) -> str:
        return f"CommitStoreHook(aws_conn_id={self.aws_conn_id!r})"

    @functools.cached_property
    def s3_settings(self) -> S3Settings:
        """Endpoint, region, TLS, botocore options and frozen credentials, resolved once per hook.

        Frozen credentials are what ``AwsBaseHook.get_credentials()`` returns; they are resolved
        through the connection's session (so assumed roles and profiles work) and masked in logs.
        """
        connection = self.conn_config
        endpoint_url = connection.get_service_endpoint_url("s3")
        region_name = self.region_name
        access_key = secret_key = token = None
        session = self.get_session(region_name=region_name)
        if session.get_credentials() is not None:
            credentials = self.get_credentials(region_name=region_name)  # masks the secret and token
            access_key, secret_key, token = credentials.access_key, credentials.secret_key, credentials.token
        else:
            self.log.warning(
                "No AWS credentials found for connection %r nor in boto3's default chain; "
                "S3 requests will fail unless the store finds some later",
                self.aws_conn_id,
            )
        from airflow_commit_provider.core.store.s3 import endpoint_from_environment

        self.log.info(
            "S3 settings from connection %r: endpoint %s, region %s",
            self.aws_conn_id,
            endpoint_url or endpoint_from_environment() or "AWS default",
            region_name or os.environ.get("AWS_DEFAULT_REGION") or "boto3 default",
        )
        return S3Settings(
            endpoint_url=endpoint_url,
            region_name=region_name,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            aws_session_token=token,
            verify=self.verify,
            botocore_config=_config_options(connection.botocore_config),
        )

    def get_store(self, path: str | os.PathLike[str] | StorePath) -> Store:
        """The store for ``path``: a local store for ``file://`` or plain paths, an HDFS store for
        ``hdfs://`` (its settings from the worker's environment, `HdfsSettings`), else an S3 store
        with the connection's settings.

        Opening a store never sends a request; the S3 client is created on first use.
        """
        path = StorePath.parse(path)
        if path.scheme not in S3_SCHEMES:
            return open_store(path, threads=self.threads)
        return open_store(path, threads=self.threads, **self.s3_settings.store_kwargs())

    def spark_environment(self, path: str | os.PathLike[str] | StorePath) -> dict[str, str]:
        """``AWS_*`` variables that give a Spark job the same S3 access (empty off S3)."""
        if StorePath.parse(path).scheme not in S3_SCHEMES:
            return {}
        return self.s3_settings.environment()


def _config_options(config: Config | None) -> dict[str, Any] | None:
    """The options a botocore ``Config`` was given, as plain values a Spark job's environment can
    carry. Read where ``Config.merge`` reads them: botocore fills some others in (e.g.
    ``inject_host_prefix``), and those must not override the store's own defaults."""
    if config is None:
        return None
    options = dict(config._user_provided_options)
    if options.get("signature_version") is UNSIGNED:
        options["signature_version"] = UNSIGNED_SIGNATURE
    return options or None

"""Airflow connections turned into the core's stores.

``file://`` locations (and plain local paths) need no connection. ``s3://`` / ``s3a://`` locations use
an AWS connection in the ``aws_default`` style of the Amazon provider, through its own connection
handling (:class:`~airflow.providers.amazon.aws.hooks.base_aws.AwsBaseHook`): login/password or the
default credential chain, ``profile_name``, ``role_arn`` (assumed roles), ``region_name`` and
``endpoint_url`` in the extras (``service_config.s3.endpoint_url`` wins over the global one), and
``verify`` (``false`` or a CA bundle path) for TLS.

The secret parts of the credentials are registered with Airflow's secrets masker as soon as they are
read, and never appear in logs, ``repr`` or XCom.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.spark.config import S3Settings

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from airflow_commit_provider.core.store import Store

__all__ = ["CommitStoreHook", "S3Settings"]


class CommitStoreHook(BaseHook):
    """Opens core stores (:func:`~airflow_commit_provider.core.store.open_store`) for Airflow tasks.

    :param aws_conn_id: the AWS connection for ``s3://`` locations (Amazon provider's ``aws`` type).
        ``None`` uses boto3's default configuration without looking a connection up.
    :param region_name: overrides the connection's ``region_name``.
    :param threads: sizes the S3 connection pool for commit/abort thread pools.
    """

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    hook_name = "Commit Protocols store"

    def __init__(
        self,
        aws_conn_id: str | None = default_conn_name,
        *,
        region_name: str | None = None,
        threads: int = 32,
    ) -> None:
        super().__init__()
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.threads = threads

    def __repr__(self) -> str:
        return f"CommitStoreHook(aws_conn_id={self.aws_conn_id!r})"

    @functools.cached_property
    def aws_hook(self) -> AwsBaseHook:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        return AwsBaseHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name, client_type="s3")

    def get_conn(self) -> AwsBaseHook:
        """The Amazon provider hook behind the S3 settings."""
        return self.aws_hook

    @functools.cached_property
    def s3_settings(self) -> S3Settings:
        """Endpoint, region and frozen credentials from the connection (resolved once per hook).

        Frozen credentials are what ``AwsBaseHook.get_credentials()`` returns; they are resolved
        through the connection's session (so assumed roles and profiles work) and masked in logs.
        """
        aws = self.aws_hook
        config = aws.conn_config
        endpoint_url = config.get_service_endpoint_url("s3")
        region_name = aws.region_name
        access_key = secret_key = token = None
        session = aws.get_session(region_name=region_name)
        if session.get_credentials() is not None:
            credentials = aws.get_credentials(region_name=region_name)  # masks the secret and token
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
            verify=config.verify,
        )

    def get_store(self, url: str | os.PathLike[str] | StorePath) -> Store:
        """The store for ``url``: a local store for ``file://`` or plain paths, else an S3 store.

        Opening a store never sends a request; the S3 client is created on first use.
        """
        path = StorePath.parse(url)
        if path.is_local:
            return open_store(path)
        return open_store(path, threads=self.threads, **self.s3_settings.store_kwargs())

    def spark_environment(self, url: str | os.PathLike[str] | StorePath) -> dict[str, str]:
        """``AWS_*`` variables that give a Spark job the same S3 access (empty for local paths)."""
        if StorePath.parse(url).is_local:
            return {}
        return self.s3_settings.environment()

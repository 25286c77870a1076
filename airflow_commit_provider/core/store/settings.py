"""Where and as whom a process reaches S3 (and HDFS, `HdfsSettings`), as one small picklable value each.

The store owns these settings because the store is what they configure: the Airflow hook fills them
from a connection, a Spark write from its options and conf (``spark.config``), and both hand them to
:class:`~airflow_commit_provider.core.store.s3.S3Store` or, as environment variables, to a child
process that reads them back here. Credentials never appear in ``repr``.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from botocore.config import Config

from airflow_commit_provider.core.hadoop_conf import hadoop_conf_value
from airflow_commit_provider.core.paths import DEFAULT_FS
from airflow_commit_provider.core.store.check import CONDITIONAL_CREATE_ENV
from airflow_commit_provider.core.store.s3_requests import REQUEST_PATH_ENV

#: The endpoint variables boto3 reads, the S3-specific one first.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: TLS verification for a child process: boto3 reads AWS_CA_BUNDLE but has no variable for `false`.
ENV_S3_VERIFY = "AIRFLOW_COMMIT_S3_VERIFY"
#: botocore ``Config`` options (a JSON object) for a child process: boto3 has no variables for most.
ENV_S3_BOTOCORE_CONFIG = "AIRFLOW_COMMIT_S3_BOTOCORE_CONFIG"
#: What botocore's ``signature_version`` option means by anonymous requests, as JSON can carry it.
UNSIGNED_SIGNATURE = "unsigned"

#: Per :class:`S3Settings` field, the environment variables a process reads it from (first set wins).
ENVIRONMENT_SOURCES: dict[str, tuple[str, ...]] = {
    "endpoint_url": ENDPOINT_VARIABLES,
    "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "aws_session_token": ("AWS_SESSION_TOKEN",),
    "region_name": ("AWS_DEFAULT_REGION", "AWS_REGION"),
    "verify": (ENV_S3_VERIFY, "AWS_CA_BUNDLE"),
    "request_path": (REQUEST_PATH_ENV,),
    "conditional_create": (CONDITIONAL_CREATE_ENV,),
    "botocore_config": (ENV_S3_BOTOCORE_CONFIG,),
}


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to reach S3. ``None`` is left to boto3's defaults."""

    endpoint_url: str | None = None
    """The S3 endpoint: an S3-compatible store's URL; None for AWS's."""
    aws_access_key_id: str | None = field(default=None, repr=False)
    """Credentials (with the secret key and session token); None for boto3's chain."""
    aws_secret_access_key: str | None = field(default=None, repr=False)
    """The secret access key; never in ``repr``, logs or command lines."""
    aws_session_token: str | None = field(default=None, repr=False)
    """A temporary credential's session token."""
    region_name: str | None = None
    """The region; None for boto3's default."""
    verify: bool | str | None = None
    """False, a CA bundle path, or None for boto3's default (verify against its bundle)."""
    request_path: str | None = None
    """auto, crt or boto3 for the hot S3 calls; None leaves it to the executor's environment, then auto."""
    conditional_create: str | None = None
    """check or trusted (``If-None-Match: *`` probed at job setup, or vouched for); None: the
    environment's ``AIRFLOW_COMMIT_S3_CONDITIONAL_CREATE``, then check."""
    botocore_config: Mapping[str, Any] | None = field(default=None, repr=False)
    """botocore ``Config`` options (timeouts, retries, proxies...), as the Amazon provider's
    ``botocore_config``; they win over the store's own defaults. Not in ``repr``: a proxy URL may
    carry a password."""

    def store_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~airflow_commit_provider.core.store.s3.S3Store`."""
        return {key: value for key, value in asdict(self).items() if value is not None and value != ""}

    def environment(self) -> dict[str, str]:
        """The same settings as the variables a child process reads (boto3's ``AWS_*``, and
        :meth:`from_text` for the rest). Meant for a job's environment, never for command lines or logs.
        """
        env = {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_DEFAULT_REGION": self.region_name,
            "AWS_ACCESS_KEY_ID": self.aws_access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.aws_secret_access_key,
            "AWS_SESSION_TOKEN": self.aws_session_token,
            "AWS_CA_BUNDLE": self.verify if isinstance(self.verify, str) else None,
            ENV_S3_VERIFY: "false" if self.verify is False else None,
            REQUEST_PATH_ENV: self.request_path,
            CONDITIONAL_CREATE_ENV: self.conditional_create,
            ENV_S3_BOTOCORE_CONFIG: _botocore_json(self.botocore_config) if self.botocore_config else None,
        }
        return {key: value for key, value in env.items() if value}

    def __repr__(self) -> str:
        secret = "***" if self.aws_secret_access_key else None
        return (
            f"S3Settings(endpoint_url={self.endpoint_url!r}, region_name={self.region_name!r}, "
            f"credentials={'given' if self.aws_access_key_id or secret else 'default chain'})"
        )

    @classmethod
    def from_text(cls, given: Mapping[str, object], environ: Mapping[str, str] | None = None) -> S3Settings:
        """Per field: the value ``given`` (text from an option or a conf), else the process environment
        (:data:`ENVIRONMENT_SOURCES`), else None."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, variables in ENVIRONMENT_SOURCES.items():
            sources[name] = name if given.get(name) else next((v for v in variables if environ.get(v)), name)
            value = given.get(name) or environ.get(sources[name])
            values[name] = (value if isinstance(value, Mapping) else str(value)) if value else None
        values["verify"] = verify_setting(values["verify"])
        if values["botocore_config"]:
            values["botocore_config"] = botocore_setting(
                values["botocore_config"], sources["botocore_config"]
            )
        return cls(**values)


def verify_setting(value: str | None) -> bool | str | None:
    """`false`/`0`/`no` turn TLS verification off, `true`/`1`/`yes` keep the default, else a CA bundle."""
    text = (value or "").strip()
    if text.lower() in ("false", "0", "no"):
        return False
    if text.lower() in ("", "true", "1", "yes"):
        return None
    return text


def botocore_setting(value: Mapping[str, Any] | str, source: str) -> dict[str, Any]:
    """botocore ``Config`` options from a mapping or its JSON text, each one a known option."""
    options: Any = value
    if isinstance(value, str):
        try:
            options = json.loads(value)
        except ValueError:
            options = None
    if not isinstance(options, Mapping):
        raise ValueError(f"{source} must be a JSON object of botocore Config options, got {value!r}")
    unknown = sorted(set(options) - set(Config.OPTION_DEFAULTS))
    if unknown:
        raise ValueError(f"{source}: {', '.join(unknown)} not botocore Config option(s)")
    return dict(options)


def _botocore_json(options: Mapping[str, Any]) -> str:
    try:
        return json.dumps(options, sort_keys=True)
    except TypeError as error:
        raise ValueError(f"botocore_config must be JSON to reach a Spark job ({error})") from None


#: The WebHDFS address (``http://namenode:9870``) when the client conf does not give it; the
#: variable a child process (a Spark executor) reads it from.
ENV_WEBHDFS_URL = "AIRFLOW_COMMIT_WEBHDFS_URL"
#: Hadoop's own variable for the simple-auth user name (``user.name`` on WebHDFS).
ENV_HADOOP_USER_NAME = "HADOOP_USER_NAME"
#: Where the NameNode's WebHDFS address is, when it is not given: the cluster's client conf.
NAMENODE_HTTP_ADDRESS = ("hdfs-site.xml", "dfs.namenode.http-address")


@dataclass(frozen=True)
class HdfsSettings:
    """Where and as whom to reach HDFS over WebHDFS (simple authentication; Kerberos/SPNEGO and
    delegation tokens are not supported).

    ``hdfs://nn:8020/t`` names the NameNode's RPC address; WebHDFS is its HTTP address, a different
    port, which the client conf gives (``dfs.namenode.http-address``) or ``webhdfs_url`` sets.
    """

    webhdfs_url: str | None = None
    """``http://host:port`` of the NameNode's WebHDFS for every ``hdfs://`` path; None: from
    ``$HADOOP_CONF_DIR/hdfs-site.xml`` for the default filesystem's NameNode."""
    user: str | None = None
    """The ``user.name`` of every request; None: ``HADOOP_USER_NAME``, else the OS user (as Hadoop)."""
    timeout: float = 120.0
    """Seconds to connect, and between bytes of a response, before a request fails."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> HdfsSettings:
        """The settings a process was given: ``AIRFLOW_COMMIT_WEBHDFS_URL`` and ``HADOOP_USER_NAME``."""
        environ = os.environ if environ is None else environ
        return cls(
            webhdfs_url=environ.get(ENV_WEBHDFS_URL) or None, user=environ.get(ENV_HADOOP_USER_NAME) or None
        )

    def environment(self) -> dict[str, str]:
        """The same settings as the variables a child process reads back in `from_environment`."""
        env = {ENV_WEBHDFS_URL: self.webhdfs_url, ENV_HADOOP_USER_NAME: self.user}
        return {key: value for key, value in env.items() if value}

    def user_name(self) -> str:
        return self.user or getpass.getuser()

    def resolved_for(self, namenode: str, environ: Mapping[str, str] | None = None) -> HdfsSettings:
        """These settings with the WebHDFS address of `namenode` and the user as this process
        resolves them, for processes that must not resolve them again: a write's Spark executors,
        whose own environment is the NodeManager's (its ``HADOOP_CONF_DIR`` may name another
        cluster, or none; its OS user is not the job's). A `ValueError` says which setting is missing.
        """
        return HdfsSettings(
            webhdfs_url=self.webhdfs_address(namenode, environ), user=self.user_name(), timeout=self.timeout
        )

    def webhdfs_base(self, namenode: str, environ: Mapping[str, str] | None = None) -> str:
        """The WebHDFS root URL (``http://host:port/webhdfs/v1``) of the NameNode `namenode`
        (``host:port``, a path's authority); a `ValueError` says which setting is missing."""
        return self.webhdfs_address(namenode, environ) + "/webhdfs/v1"

    def webhdfs_address(self, namenode: str, environ: Mapping[str, str] | None = None) -> str:
        """The WebHDFS address (``http://host:port``) of the NameNode `namenode`: the setting, else
        ``dfs.namenode.http-address`` of the client conf when `namenode` is its default filesystem's."""
        if self.webhdfs_url:
            return self.webhdfs_url.rstrip("/")
        address, source = hadoop_conf_value(*NAMENODE_HTTP_ADDRESS, environ)
        default_fs, _ = hadoop_conf_value(*DEFAULT_FS, environ)
        default_namenode = (default_fs or "").partition("://")[2].split("/", 1)[0]
        if not address or namenode != default_namenode:
            raise ValueError(
                f"no WebHDFS address for hdfs://{namenode}: set {ENV_WEBHDFS_URL} (http://host:port) or "
                f"HADOOP_CONF_DIR to this NameNode's client conf (dfs.namenode.http-address in {source})"
            )
        host, _, port = address.rpartition(":")
        if host in ("0.0.0.0", "", "[::]"):  # a bind address: the NameNode's own host serves it
            host = namenode.rpartition(":")[0] or namenode
        return f"http://{host}:{port}"

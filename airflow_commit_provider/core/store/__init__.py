"""Stores: local files, HDFS and S3, opened for a path (`s3://`, `s3a://`, `hdfs://`, `file://` or a
local path)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.paths import HDFS_SCHEME, StorePath
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    FileStatus,
    NoSuchUploadError,
    PendingUpload,
    Store,
    StoreCapabilities,
    StoreError,
    UnsupportedStoreError,
    UploadedPart,
)

if TYPE_CHECKING:
    from airflow_commit_provider.core.store.settings import HdfsSettings

__all__ = [
    "FileAlreadyExistsError",
    "FileNotFoundInStoreError",
    "FileStatus",
    "NoSuchUploadError",
    "PendingUpload",
    "Store",
    "StoreCapabilities",
    "StoreError",
    "UnsupportedStoreError",
    "UploadedPart",
    "open_store",
]


def open_store(
    path: str | StorePath, *, threads: int = 32, hdfs: HdfsSettings | None = None, **s3_options: Any
) -> Store:
    """The store for `path`; `threads` sizes the S3 connection pool to the commit thread pool.

    `s3_options` go to :class:`S3Store` (endpoint_url, credentials, region, ...); callers pass them
    whatever the path, and the other stores need none. An ``hdfs://`` store takes `hdfs`, else reads
    its settings from the process (`HdfsSettings.from_environment`: ``HADOOP_CONF_DIR``,
    ``AIRFLOW_COMMIT_WEBHDFS_URL``, ``HADOOP_USER_NAME``).
    """
    path = StorePath.parse(path)
    if path.is_local:
        from airflow_commit_provider.core.store.local import LocalStore

        return LocalStore()
    if path.scheme == HDFS_SCHEME:
        from airflow_commit_provider.core.store.hdfs import HdfsStore

        return HdfsStore(hdfs, threads=threads)
    from airflow_commit_provider.core.store.s3 import S3Store

    return S3Store(max_pool_connections=threads + 4, **s3_options)

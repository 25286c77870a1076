"""What the NameNode holds, asked directly (not through the store under test): what a store's
listings skip (its hidden ``.__publishing__`` writes) or cannot show (empty folders) is counted too."""

from __future__ import annotations

from typing import Any

import requests

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.settings import HdfsSettings


def namespace_counts(cluster: Any, directory: StorePath) -> tuple[int, int]:
    """(files, folders) the NameNode holds under `directory`, itself included, hidden ones too."""
    summary = requests.get(
        f"{cluster.webhdfs_url}/webhdfs/v1/{directory.key}",
        params={"op": "GETCONTENTSUMMARY", "user.name": HdfsSettings().user_name()},
        timeout=60,
    ).json()["ContentSummary"]
    return summary["fileCount"], summary["directoryCount"]


def listed_counts(names: list[str] | dict[str, Any]) -> tuple[int, int]:
    """(files, folders) a listing of these relative paths implies: every parent, and the root."""
    folders = {"/".join(name.split("/")[:depth]) for name in names for depth in range(name.count("/") + 1)}
    return len(names), len(folders)

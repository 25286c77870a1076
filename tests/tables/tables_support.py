"""What the catalog-table tests share besides fixtures (conftest.py holds those)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from airflow_commit_provider.devtools.postgres import Database


@dataclass(frozen=True)
class SharedMetastore:
    """A metastore's database, the folder whose ``hive-site.xml`` holds its password, and where
    its tables' default locations go."""

    database: Database
    password_conf: Path
    warehouse: Path

    def spec(self) -> dict[str, str]:
        """What an application needs to reach it, without the password."""
        return {
            "jdbc_url": self.database.jdbc_url,
            "user": self.database.user,
            "warehouse": self.warehouse.as_uri(),
        }

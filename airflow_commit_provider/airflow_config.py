"""The provider's section of Airflow's configuration, ``[airflow_commit]``: each option declared once.

The declaration is what ``get_provider_info`` gives Airflow as ``config`` (so ``airflow config
list`` shows the section with its defaults and ``airflow config get-value`` finds its options), what
the readers pass as the fallback when they read an option through Airflow's conf, and what the
documentation's table is rendered from (the ``airflow-options`` directive in docs/_ext). No Airflow
import: the provider metadata imports this module, and the readers hand in the conf they use (`compat.conf` on the worker and in
the api-server).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

SECTION = "airflow_commit"
SECTION_DESCRIPTION = "Settings of the Commit Protocols provider (airflow-commit-provider).\n"
#: The provider release that first read an option (every option so far: nothing was released before).
FIRST_RELEASE = "0.1.0"


@dataclass(frozen=True)
class Option:
    """One option of ``[airflow_commit]``, as Airflow's provider schema declares it."""

    name: str
    type: Literal["string", "integer"]
    default: str
    description: str
    example: str
    version_added: str = FIRST_RELEASE

    def declaration(self) -> dict[str, Any]:
        """This option in ``provider_info.schema.json``'s ``config`` form."""
        return {
            "description": self.description,
            "version_added": self.version_added,
            "type": self.type,
            "example": self.example,
            "default": self.default,
        }

    @property
    def environment_variable(self) -> str:
        """The variable that sets this option, as for every Airflow option."""
        return f"AIRFLOW__{SECTION.upper()}__{self.name.upper()}"

    def read(self, conf: Any) -> str:
        """The configured value (``airflow.cfg`` or `environment_variable`), else the default."""
        return str(conf.get(SECTION, self.name, fallback=self.default))

    def read_count(self, conf: Any) -> int:
        """The value of an integer option, at least 1; a ValueError naming the option otherwise."""
        value = self.read(conf)
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"[{SECTION}] {self.name} must be a whole number of at least 1, not {value!r}")
        return count


LOCAL_WORK_ROOT = Option(
    name="local_work_root",
    type="string",
    default="",
    description=(
        "The folder under which each try of a ``CommittedSparkSubmitOperator`` task works, in a folder\n"
        "of its own per task instance and try that the next try (or a sweep) removes after a kill.\n"
        "It must belong to the user running the tasks. Empty: ``airflow-commit`` under the system\n"
        "temporary directory (``TMPDIR``). A task's ``local_work_root`` argument overrides it.\n"
    ),
    example="/var/lib/airflow/commit-tries",
)
COMMITS_PER_DESTINATION = Option(
    name="commits_per_destination",
    type="integer",
    default="10",
    description=(
        "How many commits the Commits page lists for each destination, newest first. Each is one\n"
        "read of the destination's records index plus a few small reads per commit listed.\n"
    ),
    example="25",
)
COMMITS_PAGE_DESTINATIONS = Option(
    name="commits_page_destinations",
    type="integer",
    default="20",
    description=(
        "How many destinations the Commits page shows at most: those most recently written by the\n"
        "committed tasks of the DAGs the user may read.\n"
    ),
    example="50",
)
OPTIONS = (LOCAL_WORK_ROOT, COMMITS_PER_DESTINATION, COMMITS_PAGE_DESTINATIONS)


def provider_config() -> dict[str, Any]:
    """The ``config`` entry of the provider info."""
    return {
        SECTION: {
            "description": SECTION_DESCRIPTION,
            "options": {option.name: option.declaration() for option in OPTIONS},
        }
    }

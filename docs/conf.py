"""Sphinx configuration of the documentation site (`make docs`; the suite builds it in tests/docs).

Sphinx, as Airflow's own providers use, with MyST for the Markdown pages; the references are
generated from their one owner in the code (docs/_ext/reference_tables.py, autodoc, sphinx-argparse).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
# autodoc imports the operators, which import Airflow: a throwaway home, never the user's ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", str(DOCS.parent / "build" / "docs-airflow-home"))

from importlib.metadata import version as installed_version  # noqa: E402

release = installed_version("airflow-commit-provider")

project = "airflow-commit-provider"
author = "airflow-commit-provider contributors"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxarg.ext",
    "reference_tables",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext"]
# `Header text <#anchor>` links between and within pages, as GitHub renders them.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Docstrings write `name` for code, as the Markdown pages do.
default_role = "literal"

html_theme = "furo"
html_title = f"airflow-commit-provider {release}"

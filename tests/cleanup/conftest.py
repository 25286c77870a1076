"""Fixtures for the cleanup tests: an Airflow home of their own, and store wrappers for races."""

from __future__ import annotations

import os
import tempfile

# Airflow reads its home when first imported; keep it out of ~/airflow and skip the examples.
# setdefault: another conftest (or the caller) may already have chosen one.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-home-cleanup-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

"""`python -m airflow_commit_provider.cli`, as the `airflow-commit` script."""

import sys

from airflow_commit_provider.cli import main

sys.exit(main())

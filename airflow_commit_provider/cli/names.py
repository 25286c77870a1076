"""The names the commands, their help and their errors share: the programs, the positionals, how a
location is written (below every other module of the CLI, so that none of them imports another's
module for a word)."""

from __future__ import annotations

PROG = "airflow-commit"
#: The group `airflow` lists the commands under (Airflow 3.2+).
AIRFLOW_GROUP = "commit-protocols"
DISTRIBUTION = "airflow-commit-provider"
#: The positional of a cleanup of uploads or temporary trees: the directory it acts in.
SCOPE = "SCOPE"
#: The positional of the commands about a job's output and records: where it writes.
DESTINATION = "DESTINATION"
#: How a scope or destination is written, for the help texts.
URL_FORMS = "s3://bucket/prefix, s3a://..., file:///path or a path"

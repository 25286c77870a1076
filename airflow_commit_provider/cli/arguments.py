"""What every command's handler reads from its arguments: the error it raises for users, the scope a
cleanup acts on, and the store a command names (through an Airflow connection or boto3's environment).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from airflow_commit_provider.cleanup import parse_scope
from airflow_commit_provider.cli.names import DESTINATION, SCOPE
from airflow_commit_provider.core.paths import S3_SCHEMES, StorePath
from airflow_commit_provider.core.store import Store, open_store


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def scope_argument(args: argparse.Namespace) -> tuple[str, str]:
    """A cleanup's positional, as the help names it (SCOPE or DESTINATION), and as the user typed it."""
    if getattr(args, "scope", None) is not None:
        return SCOPE, args.scope
    return DESTINATION, args.destination


def scope_of(args: argparse.Namespace) -> StorePath:
    """Validate the scope before opening anything, naming it as the help does and as the user typed it."""
    argument, text = scope_argument(args)
    return parse_scope(text, argument=argument, allow_bucket_root=args.allow_bucket_root)


def store_for(args: argparse.Namespace, where: str) -> Store:
    """The store holding `where`: for S3, with the settings of `--aws-conn-id` when given (else
    boto3's environment), `--endpoint-url` over both, and a pool sized to `--threads`; local files
    and HDFS (`HdfsSettings`, from the environment) take none of those."""
    path = StorePath.parse(where)
    if path.scheme not in S3_SCHEMES:
        return open_store(path, threads=args.threads)
    options = _connection_settings(args) if args.aws_conn_id else {}
    if args.endpoint_url:
        options["endpoint_url"] = args.endpoint_url
    return open_store(path, threads=args.threads, **options)


def _connection_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The S3 store's settings from the Airflow connection `--aws-conn-id`, resolved by the Amazon
    provider's connection handling (`CommitStoreHook`, as the operators do): from the secrets
    backends, environment variables (`AIRFLOW_CONN_<ID>`) and, where there is one, the metadata
    database. The secret parts are registered with Airflow's secrets masker when read."""
    # Airflow's logging writes to stdout, which is the command's answer (-o json): its log lines go to
    # stderr, as those of `airflow`'s own commands that take -o. Its handler takes the stdout of when
    # Airflow is first imported (here, under `airflow-commit`), and its structlog loggers (the hook's)
    # whatever stdout is when they write.
    with contextlib.redirect_stdout(sys.stderr):
        from airflow_commit_provider.hooks.commit_store import CommitStoreHook

        hook = CommitStoreHook(args.aws_conn_id, threads=args.threads)
        try:
            hook.get_connection(args.aws_conn_id)
        except Exception as error:  # AirflowNotFoundException, whose module differs between Airflow versions
            if type(error).__name__ != "AirflowNotFoundException":
                raise
            raise CliError(
                f"--aws-conn-id {args.aws_conn_id}: no such connection in the secrets backends, the "
                f"environment (AIRFLOW_CONN_{args.aws_conn_id.upper()}) or the metadata database"
            ) from None
        return hook.s3_settings.store_kwargs()

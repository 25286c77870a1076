"""`airflow-commit dev-s3`: the embedded S3 (SeaweedFS) on 127.0.0.1 for development; the command is
`devtools.embedded_s3`'s, which `python -m` runs too."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_commit_provider.cli.arguments import Parents


def add_commands(groups: Any, parents: Parents) -> None:
    from airflow_commit_provider.devtools.embedded_s3 import add_arguments

    dev_s3 = groups.add_parser(
        "dev-s3",
        help="run the embedded S3 (SeaweedFS) on 127.0.0.1 until Ctrl-C, for development",
        description="Run the embedded S3 on 127.0.0.1 until Ctrl-C or SIGTERM, and print the Airflow "
        "connection to set (with this local server's secret key).",
    )
    add_arguments(dev_s3).set_defaults(handler=_dev_s3)


def _dev_s3(args: argparse.Namespace) -> int:
    from airflow_commit_provider.devtools.embedded_s3 import serve

    return serve(args.dir, args.port, args.bucket)

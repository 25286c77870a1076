"""`airflow-commit-dev`: the development commands, kept out of the production CLI (`airflow-commit`,
`airflow commit-protocols`). `dev-s3` runs the embedded S3 (`embedded_s3`, which `python -m` runs too),
`dev-hadoop` the test YARN + HDFS cluster (`hadoop_cluster`, likewise)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from airflow_commit_provider.devtools import hadoop_cluster
from airflow_commit_provider.devtools.embedded_s3 import add_arguments, serve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-commit-dev", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add_arguments(
        commands.add_parser(
            "dev-s3",
            help="run the embedded S3 (SeaweedFS) on 127.0.0.1 until Ctrl-C, for development",
            description="Run the embedded S3 on 127.0.0.1 until Ctrl-C or SIGTERM, and print the Airflow "
            "connection to set (with this local server's secret key).",
        )
    )
    commands.add_parser(
        "dev-hadoop",
        help="run the test YARN + HDFS cluster on 127.0.0.1 until Ctrl-C, for development",
        description="Run Hadoop's MiniDFSCluster and MiniYARNCluster on 127.0.0.1 until Ctrl-C or SIGTERM, "
        "and print the HADOOP_CONF_DIR to export.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "dev-hadoop":
        return hadoop_cluster.serve()
    return serve(args.dir, args.port, args.bucket)

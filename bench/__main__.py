"""Benchmarks: `python -m bench` (or `make bench`) runs every scenario and writes the report.

    python -m bench [--scenario {job_commit,committers_s3,local,cleanup,datasource,s3a_writes,
                                 arrow_batches,s3a_job_commit,report_page,report_file_pages,
                                 table_registration,asset_events,partitions,scale,
                                 verify_files,request_paths,hdfs_replace,hdfs,all}]
                    [--size {tiny,small,full}]
                    [--repeat N] [--out bench/results] [--threads N] [--max-load L] [--max-wait S]

Each scenario writes `<out>/<scenario>.json`; then `<out>/REPORT.md` and `<out>/chart.png` are
rebuilt from every scenario JSON in `<out>` (so running one scenario alone refreshes its part).
`tiny` is for the smoke test (seconds), `small` fits a few minutes per scenario, `full` has the
issue's sizes (1k/10k pending files, ≥ 1 GB writes, 10k orphaned uploads).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import (
    DEFAULT_OUT,
    SIZES,
    BenchEnv,
    host_info,
    load_average,
    log,
    now_iso,
    wait_for_quiet_host,
    write_json,
)
from bench.report import write_report

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
    from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

SCENARIOS = {
    "job_commit": "bench.job_commit",
    "committers_s3": "bench.committers_s3",
    "local": "bench.local",
    "cleanup": "bench.cleanup",
    "datasource": "bench.datasource",
    "s3a_writes": "bench.s3a_writes",
    "arrow_batches": "bench.arrow_batches",
    "s3a_job_commit": "bench.s3a_job_commit",
    "report_page": "bench.report_page",
    "report_file_pages": "bench.report_file_pages",
    "table_registration": "bench.table_registration",
    "asset_events": "bench.asset_events",
    "partitions": "bench.partitions",
    "scale": "bench.scale",
    "verify_files": "bench.verify_files",
    "request_paths": "bench.request_paths",
    "hdfs_replace": "bench.hdfs_replace",
    "hdfs": "bench.hdfs_commits",
}
SCHEMA_VERSION = 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement (default 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory")
    parser.add_argument("--threads", type=int, default=16, help="commit/abort thread pool (default 16)")
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="wait until the 1-minute load average is at most this before each scenario",
    )
    parser.add_argument("--max-wait", type=float, default=900, help="longest wait for --max-load (s)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(
    argv: list[str] | None = None,
    *,
    embedded_s3: EmbeddedS3 | None = None,
    hadoop_cluster: HadoopCluster | None = None,
    report: bool = True,
) -> dict[str, Any]:
    """Run the chosen scenarios; returns {scenario: result document}. Servers handed in are used
    (and left running) instead of starting the scenario's own. Without `report`, the report is left
    as it was (the smoke test runs one scenario at a time and builds it once, at the end: its chart
    alone took 2-3 s of CPU each time)."""
    args = parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    args.out.mkdir(parents=True, exist_ok=True)
    documents: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as work:
        env = BenchEnv(
            args.size,
            args.repeat,
            Path(work),
            embedded_s3=embedded_s3,
            hadoop_cluster=hadoop_cluster,
            threads=args.threads,
        )
        try:
            host = host_info()
            for name in names:
                load_before = (
                    wait_for_quiet_host(args.max_load, args.max_wait)
                    if args.max_load is not None
                    else load_average()
                )
                log(f"scenario {name} (size {args.size}, {args.repeat} repetitions), load {load_before}")
                started_at = now_iso()
                began = time.monotonic()
                module = importlib.import_module(SCENARIOS[name])
                result = module.run(env)
                document = {
                    "schema_version": SCHEMA_VERSION,
                    **result.to_json(),
                    "started_at": started_at,
                    "seconds": round(time.monotonic() - began, 1),
                    "environment": {
                        "host": host,
                        "load_before": load_before,
                        "load_after": load_average(),
                        "threads": args.threads,
                        "command": " ".join(
                            ["python -m bench", *(argv if argv is not None else sys.argv[1:])]
                        ),
                    },
                }
                write_json(args.out / f"{name}.json", document)
                documents[name] = document
                log(f"scenario {name} done in {document['seconds']} s -> {args.out / f'{name}.json'}")
        finally:
            env.close()
    if report:
        log(f"report: {write_report(args.out)}")
    return documents


if __name__ == "__main__":
    from airflow_commit_provider.devtools.processes import interrupt_on_sigterm

    interrupt_on_sigterm()  # a SIGTERM'd run stops its servers (SeaweedFS, Spark, ...) as Ctrl-C does
    main()

"""`make fuzz`'s coverage-guided campaign: every atheris target (tests/fuzz/atheris) for a fixed
number of runs, one subprocess each, one after the other, then a table of executions, coverage
(libFuzzer's ``cov:`` edges and ``ft:`` features), corpus size and findings per target.

Only our package is instrumented (not PySpark, Airflow or the standard library). Each target's
working corpus grows in a cache directory outside the checkout, seeded from the repository's
corpus; a finding is written to the target's crashers/ directory, where the regression test
replays it from then on. Exit status 1 when any target found something.

    python scripts/atheris_campaign.py [--runs N] [TARGET ...]
    python scripts/atheris_campaign.py --target NAME [libFuzzer flags]   (one target, in-process)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.atheris_targets import corpus_dir, crashers_dir, load_target, target_names

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "airflow-commit-provider" / "atheris"
#: Per input: memory and time beyond which libFuzzer reports an oom or timeout finding.
LIMITS = ("-rss_limit_mb=2048", "-timeout=20")
_STATS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", re.MULTILINE)
_EXECUTED = re.compile(r"^stat::number_of_executed_units: (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Result:
    target: str
    executions: int
    cov: int
    ft: int
    corpus: int
    findings: list[Path]
    exit_code: int


def fuzz_in_process(name: str, libfuzzer_flags: list[str]) -> None:
    """Run one target under libFuzzer in this process, our package instrumented (never returns)."""
    import atheris

    with atheris.instrument_imports(include=["airflow_commit_provider"]):
        target = load_target(name)
    atheris.Setup([sys.argv[0], f"-max_len={target.MAX_LEN}", *libfuzzer_flags], target.TestOneInput)
    atheris.Fuzz()


def campaign_run(name: str, runs: int) -> Result:
    """One target's campaign in a subprocess, its output kept in the cache (``<target>.log``)."""
    working, crashers = CACHE / name, crashers_dir(name)
    working.mkdir(parents=True, exist_ok=True)
    crashers.mkdir(parents=True, exist_ok=True)
    before = set(crashers.iterdir())
    flags = [f"-runs={runs}", *LIMITS, "-print_final_stats=1", f"-artifact_prefix={crashers}/"]
    log = CACHE / f"{name}.log"
    # libFuzzer exits without Python's clean-up: what a target puts in a temporary directory stays
    # in this one, emptied at each run.
    scratch = CACHE / f"{name}.tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    with log.open("wb") as output:
        command = [sys.executable, __file__, "--target", name, *flags, str(working), str(corpus_dir(name))]
        environment = {**os.environ, "TMPDIR": str(scratch)}
        exit_code = subprocess.run(
            command, stdout=output, stderr=subprocess.STDOUT, env=environment, check=False
        ).returncode
    text = log.read_text(errors="replace")
    findings = sorted(set(crashers.iterdir()) - before)
    if not any(crashers.iterdir()):
        crashers.rmdir()  # no empty directories in the checkout
    stats = _STATS.findall(text)
    executed = _EXECUTED.findall(text)
    _total, cov, ft, corpus = (int(value) for value in stats[-1]) if stats else (0, 0, 0, 0)
    return Result(name, int(executed[-1]) if executed else 0, cov, ft, corpus, findings, exit_code)


def report(results: list[Result]) -> str:
    lines = [f"{'target':<18} {'executions':>10} {'cov':>6} {'ft':>6} {'corpus':>7}  findings"]
    for result in results:
        found = ", ".join(str(path) for path in result.findings) or (
            "none" if result.exit_code == 0 else f"exit {result.exit_code}: see {CACHE / result.target}.log"
        )
        lines.append(
            f"{result.target:<18} {result.executions:>10} {result.cov:>6} {result.ft:>6} {result.corpus:>7}  {found}"
        )
    total = sum(result.executions for result in results)
    failed = sum(1 for result in results if result.findings or result.exit_code)
    lines.append(f"total: {total} executions over {len(results)} targets, {failed} with findings")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--target"] and len(argv) > 1:
        fuzz_in_process(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("FUZZ_RUNS", "60000")))
    parser.add_argument(
        "targets", nargs="*", metavar="TARGET", help=f"default: all ({', '.join(target_names())})"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.targets) - set(target_names()))
    if unknown:
        parser.error(f"no such target(s): {', '.join(unknown)}")
    if importlib.util.find_spec("atheris") is None:
        parser.error("atheris is not installed: `make fuzz-atheris` installs the [fuzz] extra")
    results = []
    for name in args.targets or target_names():
        results.append(campaign_run(name, args.runs))
        print(report(results[-1:]).splitlines()[1], flush=True)
    print(report(results))
    return 1 if any(result.findings or result.exit_code for result in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

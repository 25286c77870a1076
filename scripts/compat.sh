#!/usr/bin/env bash
# The compatibility run (`make compat`; in `make test`, the end of scripts/test.sh's side lane): the
# oldest set we support - constraints/oldest.txt: Airflow 3.1.1, PySpark 4.0.0, every lower bound of
# pyproject.toml - on Python 3.10, running the subset below.
#
#   1. a virtualenv OUTSIDE the checkout, keyed by the hash of constraints/oldest.txt and
#      pyproject.toml's dependencies (~/.cache/airflow-commit-provider/venvs/oldest-<hash>;
#      AIRFLOW_COMMIT_CACHE overrides the cache folder), so a fresh clone reuses it. Made once with Python 3.10
#      (PYTHON310=..., else python3.10, else pyenv's 3.10) and pip install -c constraints/oldest.txt.
#   2. this package installed editable from the checkout being tested (re-linked when the venv was
#      made from another clone): the run tests this checkout's code against the old dependencies;
#      the built wheel is what the deployment test installs.
#   3. pytest on COMPAT_TESTS with -m "not hadoop_peers": Hadoop's own committers need jars pinned
#      to the Hadoop inside the newest PySpark (devtools/hadoop_jars.py), not PySpark 4.0's 3.4.1.
#
# Extra pytest arguments: COMPAT_ARGS='-x -k ...'. Quiet on success but for pytest's own output.
set -euo pipefail

cd "$(dirname "$0")/.."

CONSTRAINTS=constraints/oldest.txt
EXTRAS="test,embedded-s3,crt"
CACHE="${AIRFLOW_COMMIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airflow-commit-provider}"
# Keyed by what decides the install: the constraints and pyproject.toml's dependencies (not its
# markers or tool settings, which other changes touch), by the helper scripts/bootstrap.sh uses.
VENV="$CACHE/venvs/oldest-$(python3 scripts/venv_key.py "$CONSTRAINTS")"

# What the old set must keep working, one file per surface that meets an old dependency (the main
# suite runs everything on the newest set; this run repeats only what the old versions could break):
# the core protocol on both stores through old boto3 and pyarrow (formats, the conditional creates
# behind the commit point and conflicts), the Spark writer and data source on PySpark 4.0 (what
# Spark reads back, partitions, the drift guard), and the Airflow pieces on Airflow 3.1 (the asset
# events a commit emits, the sensor in a DAG run, its trigger, the commit report plugin inside
# Airflow's own API app: no api-server here, test_commit_report_ui builds it in-process).
COMPAT_TESTS=(
    tests/core/test_commit_formats.py
    tests/core/test_commit_conflicts.py
    tests/spark/test_drift.py
    tests/spark/test_fidelity.py
    tests/spark/test_datasource.py
    tests/spark/test_partitions.py
    tests/airflow/test_committed_assets.py
    tests/airflow/test_success_sensor_in_airflow.py
    tests/airflow/test_success_manifest_trigger.py
    tests/airflow/test_commit_report_ui.py
)

say() { echo "compat: $*"; }
die() {
    echo "compat: ERROR: $*" >&2
    exit 1
}

pick_python310() {
    local cand
    for cand in "${PYTHON310:-}" python3.10 "$(pyenv root 2>/dev/null)"/versions/3.10*/bin/python3.10 \
        "$HOME"/.pyenv/versions/3.10*/bin/python3.10; do
        [ -n "$cand" ] || continue
        if "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; then
            echo "$cand"
            return 0
        fi
    done
    return 1
}

# --- 1. the cached virtualenv -------------------------------------------------------------------------

if [ -f "$VENV/.complete" ]; then
    say "venv $VENV present"
else
    PY=$(pick_python310) || die "the compatibility run needs Python 3.10: set PYTHON310=/path/to/python3.10"
    say "creating $VENV with $PY and -c $CONSTRAINTS (once per constraints/pyproject change)"
    start=$SECONDS
    # Made under its final name (console scripts record their interpreter's path); .complete marks
    # a finished install, so an interrupted one is made again.
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PY" -m venv "$VENV" || die "'$PY -m venv' failed"
    log="$VENV/pip.log"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
        -c "$CONSTRAINTS" -e ".[$EXTRAS]" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "pip install failed (full log: $log); the venv is left incomplete and is made again next run"
    fi
    touch "$VENV/.complete"
    say "installed in $((SECONDS - start)) s"
    for stale in "$CACHE"/venvs/oldest-*; do # earlier constraints/dependencies: ~1 GB each
        [ "$stale" = "$VENV" ] || rm -rf "$stale"
    done
fi

# --- 2. this checkout, editable -----------------------------------------------------------------------

linked=$(cd / && "$VENV/bin/python" -c 'import airflow_commit_provider, os; print(os.path.dirname(os.path.dirname(os.path.realpath(airflow_commit_provider.__file__))))' 2>/dev/null || true)
if [ "$linked" != "$(pwd -P)" ]; then
    say "linking this checkout (was: ${linked:-none})"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --no-deps -q -e . ||
        die "pip install -e . failed"
fi

# --- 3. the run ---------------------------------------------------------------------------------------

versions=$("$VENV/bin/python" -c '
import platform
from importlib.metadata import version
names = ("apache-airflow", "pyspark", "pyspark-client", "pyarrow", "boto3")
print("Python", platform.python_version() + ",", ", ".join(f"{name} {version(name)}" for name in names))')
say "$versions"

export PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
rc=0
# shellcheck disable=SC2086 # COMPAT_ARGS is a list of pytest arguments
"$VENV/bin/python" -m pytest -p no:cacheprovider -m "not hadoop_peers" "${COMPAT_TESTS[@]}" ${COMPAT_ARGS:-} || rc=$?
if [ "$rc" -eq 5 ]; then
    die "pytest collected no tests (exit 5)"
fi
exit "$rc"

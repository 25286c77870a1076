#!/usr/bin/env bash
# Idempotent setup used by `make demo`, `make test`, `make bench` and `make lint`.
#
#   1. .venv (python3.11, else python3 >= 3.10; override with PYTHON=...) if missing: a link to a
#      virtualenv OUTSIDE the checkout, keyed by the hash of constraints/newest.txt and pyproject.toml's
#      dependencies (~/.cache/airflow-commit-provider/venvs/newest-<hash>; AIRFLOW_COMMIT_CACHE
#      overrides the cache folder), so a fresh clone (CI) reuses the install instead of ~9 minutes of
#      pip; made there once. A checkout whose .venv is a folder of its own keeps it.
#   2. pip install -c constraints/newest.txt -e ".[test,embedded-s3,bench,docs]"  (skipped when
#      .venv/.bootstrap-stamp matches the constraints and those dependencies), and this checkout
#      linked editable into the venv when it was made from another clone
#   3. guard: pyspark and pyspark-client versions match (and match the bundled Spark jars)
#   4. Java 17+ for Spark (honours JAVA_HOME; installs openjdk-17-jre-headless via apt-get when root),
#      with the JDK's compiler module for the metastore service's and the Hadoop cluster's launchers
#      (openjdk-17-jdk-headless)
#      and the data source's Spark optimizer rule built (scripts/build_jvm.sh: javac, the venv's Spark jars)
#   5. Hadoop's S3A committers, spark-hadoop-cloud, PostgreSQL's JDBC driver (for the shared Hive
#      metastore of tests/tables) and Hadoop's minicluster (the YARN + HDFS of tests/hadoop) (pinned
#      jars, SHA-256 checked) fetched with Maven
#      into ~/.m2/repository (AIRFLOW_COMMIT_MAVEN_REPO overrides), outside the checkout; installs maven
#      via apt-get when root and it is missing. Fails naming any jar it could not fetch.
#   6. PostgreSQL's server for tests/deployment and tests/tables (installs postgresql via apt-get when root and it is missing)
#   7. Chromium for the commit report's browser test (installs chromium via apt-get when root and it is
#      missing; Playwright drives it, and never downloads a browser of its own)
#
# Options: --no-java  skip steps 4 to 7 (lint needs no JVM and no database).
#          --fuzz     also install the [fuzz] extra (atheris, for `make fuzz`), when it is missing.
# Quiet on success: one line per step. Full pip output goes to .venv/bootstrap-pip.log.
set -euo pipefail

cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.bootstrap-stamp"
PIP_LOG="$VENV/bootstrap-pip.log"
EXTRAS="test,embedded-s3,bench,docs"
# The newest set we support, frozen from a working venv (as Airflow's own constraints files are).
CONSTRAINTS=constraints/newest.txt
CHECK_JAVA=1
FUZZ=0

for arg in "$@"; do
    case "$arg" in
        --no-java) CHECK_JAVA=0 ;;
        --fuzz) FUZZ=1 ;;
        -h | --help)
            sed -n '2,16p' "$0"
            exit 0
            ;;
        *)
            echo "bootstrap: unknown option: $arg" >&2
            exit 2
            ;;
    esac
done

say() { echo "bootstrap: $*"; }
die() {
    echo "bootstrap: ERROR: $*" >&2
    exit 1
}

# --- 1. virtualenv ------------------------------------------------------------------------------------

py_ok() { # usable interpreter >= 3.10?
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1
}

pick_python() {
    local cand
    for cand in "${PYTHON:-}" python3.11 python3 python3.12 python3.13 python3.10; do
        [ -n "$cand" ] || continue
        if command -v "$cand" >/dev/null 2>&1 && py_ok "$cand"; then
            echo "$cand"
            return 0
        fi
    done
    return 1
}

# What decides the install: the constraints and pyproject.toml's dependencies (not its tool settings,
# which other changes touch), by the helper scripts/compat.sh keys its venv with.
install_key=$(python3 scripts/venv_key.py "$CONSTRAINTS" "extras=$EXTRAS")

if [ -x "$VENV/bin/python" ] && py_ok "$VENV/bin/python"; then
    say "venv $VENV ($("$VENV/bin/python" -c 'import platform; print(platform.python_version())')) present"
else
    PY=$(pick_python) || die "need Python >= 3.10 (python3.11 preferred) on PATH, or set PYTHON=/path/to/python"
    CACHE="${AIRFLOW_COMMIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airflow-commit-provider}"
    shared="$CACHE/venvs/newest-$install_key-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    rm -rf "$VENV"
    if [ ! -f "$shared/.complete" ]; then
        # Made under its final name (console scripts record their interpreter's path); .complete marks
        # a finished install, so an interrupted one is made again.
        say "creating venv $shared with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
        rm -rf "$shared"
        mkdir -p "$(dirname "$shared")"
        "$PY" -m venv "$shared" || die "'$PY -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)"
        for stale in "$CACHE"/venvs/newest-*; do # earlier constraints/dependencies: ~1.5 GB each
            [ "$stale" = "$shared" ] || rm -rf "$stale"
        done
    fi
    ln -s "$shared" "$VENV"
    say "venv $VENV -> $shared"
fi

# --- 2. packages --------------------------------------------------------------------------------------

# pip writes the interpreter it runs under into every console script: through the venv's real path,
# never the link, which a deleted clone would leave dangling.
PIP_PYTHON="$(cd "$VENV" && pwd -P)/bin/python"

want_stamp="$install_key $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])')"
have_stamp="$(cat "$STAMP" 2>/dev/null || true)"

if [ "$want_stamp" = "$have_stamp" ] && "$VENV/bin/python" -c 'import airflow_commit_provider' >/dev/null 2>&1; then
    say "packages up to date (pyproject.toml and $CONSTRAINTS unchanged)"
else
    say "installing airflow-commit-provider[$EXTRAS] (editable, -c $CONSTRAINTS) into $VENV; log: $PIP_LOG"
    start=$SECONDS
    if ! "$PIP_PYTHON" -m pip install --disable-pip-version-check --no-input \
        -c "$CONSTRAINTS" -e ".[$EXTRAS]" >"$PIP_LOG" 2>&1; then
        grep -v "^WARNING: Location 'file://" "$PIP_LOG" | tail -n 30 >&2 || true
        die "pip install failed (full log: $PIP_LOG)"
    fi
    echo "$want_stamp" >"$STAMP"
    touch "$VENV/.complete"
    say "installed in $((SECONDS - start)) s"
fi

# A venv made from another clone imports that clone's code: link this checkout instead.
linked=$(cd / && "$OLDPWD/$VENV/bin/python" -c 'import airflow_commit_provider, os; print(os.path.dirname(os.path.dirname(os.path.realpath(airflow_commit_provider.__file__))))' 2>/dev/null || true)
if [ "$linked" != "$(pwd -P)" ]; then
    say "linking this checkout (was: ${linked:-none})"
    "$PIP_PYTHON" -m pip install --disable-pip-version-check --no-input --no-deps -q -e . >>"$PIP_LOG" 2>&1 ||
        die "pip install -e . failed (full log: $PIP_LOG)"
fi

# setuptools leaves the package's metadata (airflow_commit_provider.egg-info) in the checkout when pip
# installs it editable. Wherever the checkout is on sys.path (`python -m` from here: the demo, pytest)
# it is a second distribution with the same entry points, so Airflow registered the plugin twice
# ("Plugin 'airflow_commit_report' already registered, skipping"). The venv's own metadata is enough.
rm -rf airflow_commit_provider.egg-info

# The campaign's fuzzer only: `make test` and CI do not need it (the suite replays the corpus without it).
if [ "$FUZZ" = 1 ] && ! "$VENV/bin/python" -c 'import atheris' >/dev/null 2>&1; then
    say "installing the [fuzz] extra (atheris); log: $PIP_LOG"
    "$PIP_PYTHON" -m pip install --disable-pip-version-check --no-input \
        -c "$CONSTRAINTS" -e ".[$EXTRAS,fuzz]" >"$PIP_LOG" 2>&1 ||
        die "pip install of the [fuzz] extra failed (full log: $PIP_LOG)"
fi

# --- 3. pyspark / pyspark-client guard ---------------------------------------------------------------

# Both distributions write into the same pyspark/ folder; whichever is installed last wins file by file.
# If they differ, Python UDFs and mapInArrow fail with `Py4JError ... UserDefinedPythonFunction`.
# The check has one home, shared with the drift test and the operator: spark/install_check.py.
if ! guard_out=$("$VENV/bin/python" -m airflow_commit_provider.spark.install_check 2>&1); then
    echo "$guard_out" >&2
    die "pyspark/pyspark-client mismatch. Fix: pin both to the same release in $CONSTRAINTS and re-run, or
       $VENV/bin/pip install --force-reinstall --no-deps pyspark==<pyspark-client version>"
fi
say "pyspark == pyspark-client == $guard_out"

# --- 4. Java 17+ --------------------------------------------------------------------------------------

[ "$CHECK_JAVA" = 1 ] || exit 0

JAVA_MSG="Spark needs Java 17+: install openjdk-17-jre-headless (Debian/Ubuntu) or set JAVA_HOME"

apt_install() { # apt_install PACKAGE: installs it when root on Debian/Ubuntu; never upgrades what is there
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/bootstrap-apt.XXXXXX")
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade "$1"; } \
        >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
    hash -r
}

java_major() { # prints the major version of java binary $1, or nothing
    local line v
    line=$("$1" -version 2>&1 | grep -m1 -E 'version "' || true)
    v=${line#*version \"}
    v=${v%%\"*}
    [ -n "$v" ] || return 0
    case "$v" in
        1.*) v=${v#1.} ;; # 1.8.0_292 -> 8
    esac
    echo "${v%%[!0-9]*}"
}

if [ -n "${JAVA_HOME:-}" ]; then
    JAVA_BIN="$JAVA_HOME/bin/java"
    [ -x "$JAVA_BIN" ] || die "JAVA_HOME=$JAVA_HOME has no bin/java. $JAVA_MSG"
    major=$(java_major "$JAVA_BIN")
    [ -n "$major" ] && [ "$major" -ge 17 ] ||
        die "JAVA_HOME=$JAVA_HOME is Java ${major:-unknown}; Spark uses JAVA_HOME first. $JAVA_MSG"
    say "java $major ($JAVA_BIN, from JAVA_HOME)"
else
    major=""
    command -v java >/dev/null 2>&1 && major=$(java_major java)
    if [ -z "$major" ] || [ "$major" -lt 17 ]; then
        say "java ${major:-missing} < 17: apt-get install openjdk-17-jre-headless"
        apt_install openjdk-17-jre-headless || die "$JAVA_MSG"
        major=""
        command -v java >/dev/null 2>&1 && major=$(java_major java)
        if [ -z "$major" ] || [ "$major" -lt 17 ]; then
            # another, older java may still be first on PATH: point at the new one explicitly
            die "installed openjdk-17-jre-headless but \`java\` on PATH is still ${major:-missing}.
       Run: update-alternatives --config java, or export JAVA_HOME=/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture 2>/dev/null || echo amd64)"
        fi
    fi
    say "java $major ($(command -v java))"
fi

# The Thrift metastore service of the table tests (devtools/hive_metastore.py) runs its launcher
# as a Java source file, which needs the JDK's compiler module (a JRE has none).
JAVA_CMD="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! "$JAVA_CMD" --list-modules 2>/dev/null | grep -q '^jdk.compiler@'; then
    say "java has no jdk.compiler: apt-get install openjdk-17-jdk-headless"
    apt_install openjdk-17-jdk-headless ||
        die "the metastore service needs a JDK (jdk.compiler): install openjdk-17-jdk-headless"
fi

# The data source's Spark optimizer rule (spark/source_batches.py), compiled against the venv's Spark.
VENV_PYTHON="$VENV/bin/python" bash scripts/build_jvm.sh ||
    die "airflow_commit_provider/spark/jvm/airflow-commit-spark.jar could not be built (see above)"

# --- 5. Hadoop's JVM committers (the peers the tests and benchmarks run beside ours), its minicluster

if ! command -v mvn >/dev/null 2>&1; then
    say "maven missing: apt-get install maven"
    apt_install maven || die "Maven is needed to fetch Hadoop's jars: install it (Debian/Ubuntu: apt-get install maven)"
fi
"$VENV/bin/python" -m airflow_commit_provider.devtools.hadoop_jars fetch ||
    die "Hadoop's JVM committers, its minicluster or PostgreSQL's JDBC driver could not be fetched (see the line above)"

# --- 6. PostgreSQL: Airflow's metadata DB (tests/deployment), the shared Hive metastore (tests/tables)

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null 2>&1; then
    say "postgresql missing: apt-get install postgresql"
    apt_install postgresql || die "tests/deployment and tests/tables need PostgreSQL's server: install it (Debian/Ubuntu: apt-get install postgresql)"
fi
say "postgresql server present (tests/deployment, tests/tables)"

# --- 7. Chromium for the browser test of the commit report pages (tests/deployment) -----------------

if ! command -v chromium >/dev/null 2>&1; then
    say "chromium missing: apt-get install chromium"
    apt_install chromium || die "the commit report's browser test needs Chromium: install it (Debian: apt-get install chromium)"
fi
say "chromium present (tests/deployment)"

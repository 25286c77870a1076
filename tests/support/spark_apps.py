"""What every Spark application that a test starts as a process of its own sets
(tests/spark/side_by_side_app.py, tests/tables/shared_metastore_app.py)."""

from __future__ import annotations

#: Loopback only, no UI, and a JVM tuned to start fast (the jobs are small), as a platform team
#: would set it in spark-defaults.conf.
LOCAL_APP_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}

"""A long-running stream's driver JVM gets ``STREAM_JVM_OPTIONS`` in front of the user's own flags.

The flags are read back from the JVM itself (its runtime's input arguments) in a fresh process, whose
``$SPARK_SUBMIT_OPTS`` is a user's (not the test suite's quick-JVM flags): ours come first, the user's after them
(on a JVM command line the later of two settings wins), and the variable is as the user left it afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cep.spark_bridge.spark.session import STREAM_JVM_OPTIONS, jvm_options_in_front
from tests.conftest import _java_missing_reason

ROOT = Path(__file__).resolve().parents[1]
USER_FLAG = "-Dcep.test.user.flag=kept"

PROBE = """
import json, os, sys
from cep.spark_bridge.spark.session import STREAM_JVM_OPTIONS, get_spark
spark = get_spark("local[1]", app_name="jvm-probe", jvm_options=STREAM_JVM_OPTIONS)
bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(json.dumps({"jvm": list(bean.getInputArguments()), "after": os.environ.get("SPARK_SUBMIT_OPTS")}))
spark.stop()
"""


def test_options_go_in_front_once_and_the_users_own_later_ones_win():
    assert jvm_options_in_front(("-XX:TieredStopAtLevel=1",), "") == "-XX:TieredStopAtLevel=1"
    assert jvm_options_in_front(("-XX:TieredStopAtLevel=1",), "-XX:TieredStopAtLevel=4 -Xss4m") == (
        "-XX:TieredStopAtLevel=1 -XX:TieredStopAtLevel=4 -Xss4m"
    )
    assert jvm_options_in_front(("-XX:TieredStopAtLevel=1", "-Xss4m"), "-Xss4m") == "-XX:TieredStopAtLevel=1 -Xss4m"


@pytest.mark.spark
def test_a_streams_driver_jvm_runs_with_the_stream_flags_before_the_users(tmp_path):
    reason = _java_missing_reason()
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, SPARK_SUBMIT_OPTS=USER_FLAG, CEP_SPARK_LOG=str(tmp_path / "spark.log"))
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    jvm = found["jvm"]
    for option in STREAM_JVM_OPTIONS:
        assert jvm.index(option) < jvm.index(USER_FLAG)
    assert found["after"] == USER_FLAG

"""cep on a cluster whose workers do not have it installed.

On a master other than ``local[...]`` (``spark://``, ``yarn``, ``k8s://``, ``mesos://``), ``get_spark``
ships cep to the executors itself:

* **the code**: cep's packages (``cep``, ``cep.grammar``, ``cep.matcher``, ``cep.spark_bridge``, as the
  driver imports them) and its pure-Python dependency ``lark``, in one zip built once per version of
  their files (``~/.cache/cep/ship/cep-<hash>.zip``, ``$CEP_CACHE`` overrides the folder) and added with
  ``SparkContext.addPyFile``: every executor, present and future, gets it on its ``sys.path``;
* **a Python environment**, for executors whose Python lacks numpy, pandas or pyarrow: a virtual
  environment packed with ``venv-pack`` (``venv-pack -o cep-env.tar.gz``), passed as ``spark.archives``
  (unpacked as ``./cep-env`` in each executor's directory) with ``spark.pyspark.python`` pointing at its
  interpreter. pyspark needs the same Python minor version on both sides.

Then ``check_executors`` runs one tiny job that imports cep, numpy, pandas and pyarrow on an executor
and raises ``ShippingError`` naming what is missing there (and the interpreter that ran), instead of a
first micro-batch failing with a Python traceback from a worker.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
import zipfile
from typing import Any

from cep.grammar.errors import CepError

__all__ = ["ShippingError", "archive_conf", "cep_zip", "check_executors", "is_local", "probe"]

PACKAGES = ("cep", "cep.grammar", "cep.matcher", "cep.spark_bridge")
PURE_DEPENDENCIES = ("lark",)  # cep's dependencies that are pure Python (numpy, pandas, pyarrow are not)
NEEDED_ON_EXECUTORS = ("cep", "cep.spark_bridge.alerting.worker", "numpy", "pandas", "pyarrow")
CHECK_TIMEOUT_S = 180.0  # an executor must run the check within this (a cluster with no free core never does)
_SUFFIXES = (".py", ".lark")
ENV_ALIAS = "cep-env"


class ShippingError(CepError):
    """The executors cannot run cep: what is missing there, and how to give it to them."""

    code = "E0495"


def is_local(master: str) -> bool:
    return master.startswith("local")


def _cache_dir() -> str:
    return os.path.join(os.environ.get("CEP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cep"), "ship")


def _files() -> list[tuple[str, str]]:
    """(path on disk, name in the zip) of every file to ship, in a stable order."""
    found = []
    for package in PACKAGES + PURE_DEPENDENCIES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ShippingError(f"cannot find the package {package} to ship it to the executors")
        root = list(spec.submodule_search_locations)[0]
        prefix = package.replace(".", "/")
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(names):
                if name.endswith(_SUFFIXES):
                    path = os.path.join(folder, name)
                    relative = os.path.relpath(path, root).replace(os.sep, "/")
                    if (
                        package != "cep"
                        or "/" not in relative
                        or relative.split("/")[0] not in ("grammar", "matcher", "spark_bridge")
                    ):
                        found.append((path, f"{prefix}/{relative}"))
    return found


def _forget_deleted_zips() -> None:
    """Drop zips that no longer exist from ``sys.path``.

    ``addPyFile`` also puts the zip's copy in the context's temporary folder on the driver's ``sys.path``; a
    stopped session deletes that folder, and importlib's ``find_spec`` then fails on the dead entry with a
    FileNotFoundError, so a second session in the same process could not ship cep again.
    """
    alive = [path for path in sys.path if not path.endswith(".zip") or os.path.exists(path)]
    if len(alive) != len(sys.path):
        sys.path[:] = alive
        sys.path_importer_cache.clear()


def cep_zip() -> str:
    """The zip of cep and its pure-Python dependencies (built once per content, then reused)."""
    _forget_deleted_zips()
    files = _files()
    digest = hashlib.sha256()
    for path, name in files:
        digest.update(name.encode("utf-8"))
        with open(path, "rb") as fh:
            digest.update(hashlib.sha256(fh.read()).digest())
    folder = _cache_dir()
    target = os.path.join(folder, f"cep-{digest.hexdigest()[:16]}.zip")
    if os.path.exists(target):
        return target
    os.makedirs(folder, exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, name in files:
            archive.write(path, name)
    os.replace(tmp, target)
    return target


def archive_conf(python_env: str) -> dict[str, str]:
    """Spark settings that give every executor a packed environment (``venv-pack``) to run Python in."""
    path = os.path.abspath(python_env)
    return {
        "spark.archives": f"{path}#{ENV_ALIAS}",
        "spark.pyspark.python": f"./{ENV_ALIAS}/bin/python",
        "spark.pyspark.driver.python": sys.executable,
    }


def probe(_partition) -> list[dict[str, Any]]:
    """Run on an executor: what it can import (or why not), its interpreter and its Python."""
    found: dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable}
    for name in NEEDED_ON_EXECUTORS:
        try:
            module = importlib.import_module(name)
            found[name] = getattr(module, "__version__", "ok")
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which says what is missing
            found[name] = f"missing ({type(exc).__name__}: {exc})"
    return [found]


def check_executors(spark, *, timeout: float = CHECK_TIMEOUT_S) -> dict[str, Any]:
    """Import cep and its libraries on one executor; ``ShippingError`` naming what is missing."""
    context = spark.sparkContext
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            context.setJobGroup("cep-executor-check", "cep: can an executor import cep?", interruptOnCancel=True)
            result["found"] = context.parallelize([0], 1).mapPartitions(probe).collect()[0]
        except Exception as exc:  # noqa: BLE001 - turned into a ShippingError below
            result["error"] = exc

    worker = threading.Thread(target=run, name="cep-executor-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        context.cancelJobGroup("cep-executor-check")
        raise ShippingError(
            f"no executor ran cep's start-up check within {timeout:g}s: does the cluster "
            f"({context.master}) have a free core and memory for this application?"
        )
    if "error" in result:
        text = str(result["error"])
        missing = "No module named 'cep'" in text or "ModuleNotFoundError" in text
        raise ShippingError(
            "the executors cannot "
            + ("import cep" if missing else "run cep's start-up check")
            + f": {_last_error_line(text)}; cep ships itself (a zip with addPyFile) unless the executors' Python "
            "cannot run it: give them an environment with --python-env (a venv-pack archive, docs/operations.md)"
        )
    found = result["found"]
    bad = {name: value for name, value in found.items() if str(value).startswith("missing")}
    if bad:
        raise ShippingError(
            f"the executors' Python ({found.get('executable')}, Python {found.get('python')}) lacks "
            + "; ".join(f"{name} {value}" for name, value in bad.items())
            + ": install them there, or give the executors an environment with --python-env (a venv-pack archive "
            "of this virtual environment, docs/operations.md)"
        )
    if found.get("python", "").rsplit(".", 1)[0] != ".".join(map(str, sys.version_info[:2])):
        raise ShippingError(
            f"the executors run Python {found.get('python')} and the driver Python "
            f"{sys.version.split()[0]}: pyspark needs the same minor version on both"
        )
    return found


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if "Error" in line or "Exception" in line]
    return (lines[-1] if lines else text.splitlines()[0] if text else "unknown error")[:400]

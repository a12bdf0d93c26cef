"""Installable beside other packages: the wheel holds one top-level import name of its own, ``cep`` (the
folders grammar/, matcher/ and spark_bridge/ become cep.grammar, cep.matcher and cep.spark_bridge), and,
installed into a fresh virtual environment outside the repository, its ``cep`` command runs a shipped
pattern.

The wheel is built from a copy of the sources with this environment's setuptools (no network, nothing
written into the repository); the fresh environment gets the wheel alone (``--no-deps``) and borrows
the third-party libraries it needs from this environment through a ``.pth`` line, which adds their
folder but runs none of its ``.pth`` files: the repository's editable install stays out of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "cep", "grammar", "matcher", "spark_bridge")


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source / name)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-q",
        "-w",
        str(work / "dist"),
        str(source),
        cwd=work,
    )
    (found,) = (work / "dist").glob("*.whl")
    return found


def test_the_wheel_has_one_top_level_name(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"cep"}
    assert wheel.name.startswith("cep_spark-")
    assert "cep/grammar/cep.lark" in names  # package data travels too
    packages = {name.rpartition("/")[0] for name in names if name.endswith("/__init__.py")}
    assert {"cep/grammar", "cep/matcher/pike", "cep/matcher/vector", "cep/spark_bridge/engine"} <= packages


def test_installed_elsewhere_the_command_runs_a_shipped_pattern(wheel, tmp_path):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", str(venv), cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--no-deps",
        "--no-index",
        "-q",
        str(wheel),
        cwd=tmp_path,
    )
    site = Path(
        run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip()
    )
    (site / "borrowed_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    (tmp_path / "patterns" / "data").mkdir(parents=True)
    shutil.copy(REPO / "patterns" / "v_shape.sql", tmp_path / "patterns")
    shutil.copy(REPO / "patterns" / "data" / "ticks.csv", tmp_path / "patterns" / "data")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = run(
        str(venv / "bin" / "cep"),
        "run",
        "patterns/v_shape.sql",
        "--input",
        "patterns/data/ticks.csv",
        "--engine",
        "python",
        cwd=tmp_path,
        env=env,
    )
    assert "matches: 27" in done.stdout and "(engine: python)" in done.stdout

    probe = run(
        str(python),
        "-c",
        "import importlib.util, cep; print(cep.__file__); "
        "print([n for n in ('grammar', 'matcher', 'spark_bridge') if importlib.util.find_spec(n)])",
        cwd=tmp_path,
        env=env,
    )
    where, former = probe.stdout.splitlines()
    assert Path(where).is_relative_to(venv)  # the installed copy, not the repository
    assert former == "[]"  # no top-level grammar, matcher or spark_bridge of ours to clash with PyPI's

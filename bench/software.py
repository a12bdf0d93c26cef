"""The versions a bench's figures depend on, recorded with them.

Two runs of the same bench on the same machine can differ by 2x (the Kafka floor did between two sessions whose
code for it was identical); the libraries that moved under it are the first thing to compare, and nothing else
keeps them: a fresh virtual environment takes the newest versions its bounds allow.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess

LIBRARIES = ("pyspark", "pyarrow", "pandas", "numpy", "duckdb", "confluent-kafka")


def _java() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as why:
        return f"unknown ({why})"
    lines = done.stderr.strip().splitlines()
    return lines[0] if lines else "unknown"


def versions() -> dict[str, str]:
    """Python, the kernel, Java and each library's installed version ("absent" when it is not installed)."""
    found = {"python": platform.python_version(), "kernel": platform.release(), "java": _java()}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


if __name__ == "__main__":
    for name, version in versions().items():
        print(f"{name}: {version}")

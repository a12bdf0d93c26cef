"""Imports point one way: cep -> spark_bridge -> matcher -> grammar. matcher/ and grammar/ never import
Spark; no package imports cep/. Every import statement counts, also those inside functions."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "grammar": {"matcher", "spark_bridge", "cep", "pyspark"},
    "matcher": {"spark_bridge", "cep", "pyspark"},
    "spark_bridge": {"cep"},
}


def imported_packages(path: Path) -> set[tuple[int, str]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert files
    wrong = [f"{path.relative_to(REPO)}:{line} imports {name}"
             for path in files for line, name in sorted(imported_packages(path)) if name in FORBIDDEN[package]]
    assert wrong == []


def test_the_scan_sees_imports_inside_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from cep.query import Query\n    import pyspark.sql\n")
    assert imported_packages(sample) == {(2, "cep"), (3, "pyspark")}

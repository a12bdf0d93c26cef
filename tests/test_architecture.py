"""Imports point one way: cep -> cep.spark_bridge -> cep.matcher -> cep.grammar. matcher/ and grammar/ never
import Spark; no stage imports the public API (``cep`` itself, ``cep.query``, the command). Every import
statement counts, also those inside functions."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The folders of the repository and the packages they are installed as (pyproject.toml's package-dir).
STAGES = {"grammar": "cep.grammar", "matcher": "cep.matcher", "spark_bridge": "cep.spark_bridge"}
# What each stage's code may import of ours: the stages below it, and itself.
ALLOWED = {
    "grammar": ("cep.grammar",),
    "matcher": ("cep.grammar", "cep.matcher"),
    "spark_bridge": ("cep.grammar", "cep.matcher", "cep.spark_bridge"),
}
NO_SPARK = ("grammar", "matcher")


def imports(path: Path) -> set[tuple[int, str]]:
    """(line, dotted module) of every import in ``path``; ``from package import name`` gives package.name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def ours(module: str) -> bool:
    return module == "cep" or module.startswith("cep.")


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("folder", sorted(STAGES))
def test_imports_point_one_way(folder):
    files = sorted((REPO / folder).rglob("*.py"))
    assert files
    wrong = []
    for path in files:
        for line, module in sorted(imports(path)):
            if ours(module) and not any(within(module, allowed) for allowed in ALLOWED[folder]):
                wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
            if folder in NO_SPARK and within(module, "pyspark"):
                wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert wrong == []


def test_nothing_imports_the_former_top_level_names():
    """grammar, matcher and spark_bridge are installed under cep; PyPI's packages of those names are others'."""
    files = [p for p in REPO.rglob("*.py") if ".venv" not in p.parts and "build" not in p.parts]
    wrong = [f"{path.relative_to(REPO)}:{line} imports {module}"
             for path in files for line, module in sorted(imports(path)) if module.split(".")[0] in STAGES]
    assert wrong == []


def test_the_scan_sees_imports_inside_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from cep.query import Query\n    import pyspark.sql\n")
    assert imports(sample) == {(2, "cep.query.Query"), (3, "pyspark.sql")}

"""The docs cannot drift from the code: their examples run here.

- every ``>>>`` example in README.md and docs/*.md runs as a doctest;
- every ```sql block parses and passes the checks as `cep run` checks it (``cep.check_sql``: a whole
  statement); a block starting with ``-- invalid`` must fail.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import cep
from cep.grammar.parser import split_statements

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SQL_BLOCK = re.compile(r"```sql\n(.*?)```", re.DOTALL)


def _doc_params() -> list:
    """Each document with examples; one that starts Spark (get_spark) is marked spark."""
    params = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        if ">>>" in text:
            marks = [pytest.mark.spark] if ">>> spark = get_spark()" in text else []
            params.append(pytest.param(path, marks=marks, id=path.name))
    return params


@pytest.mark.parametrize("path", _doc_params())
def test_doctests(path: Path) -> None:
    result = doctest.testfile(
        str(path), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {path.name} failed (see output above)"
    )


SQL_CASES = [(p, i, block) for p in DOCS for i, block in enumerate(SQL_BLOCK.findall(p.read_text(encoding="utf-8")))]


@pytest.mark.parametrize("path,index,block", SQL_CASES, ids=[f"{p.name}#{i}" for p, i, _ in SQL_CASES])
def test_sql_blocks_parse(path: Path, index: int, block: str) -> None:
    statements = [block[start:end] for start, end, _name in split_statements(block)]
    if block.lstrip().startswith("-- invalid"):
        with pytest.raises(cep.CepError):
            for statement in statements:
                cep.check_sql(statement)
    else:
        assert statements, f"{path.name} block {index} holds no statement"
        for statement in statements:
            cep.check_sql(statement)


def test_every_error_code_is_in_the_docs_code_tables():
    """A code raised anywhere in the library has a row in docs/language.md's tables."""
    library = [
        path for folder in ("cep", "grammar", "matcher", "spark_bridge") for path in (ROOT / folder).rglob("*.py")
    ]
    raised = {code for path in library for code in re.findall(r"\bE0\d{3}\b", path.read_text(encoding="utf-8"))}
    table = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    documented = {code for row in re.findall(r"^\| (E0[^|]*)\|", table, re.M) for code in re.findall(r"E0\d{3}", row)}
    assert sorted(raised - documented) == []


def test_performance_reading_is_written_from_the_kafka_run():
    """docs/performance.md's reading of the Kafka run is what bench/run.py computes from the run's numbers
    (bench/results-kafka-e2e.json): prose that cannot contradict its own tables."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    bench_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_run)
    e2e = json.loads((ROOT / "bench" / "results-kafka-e2e.json").read_text(encoding="utf-8"))
    reading = [line for line in bench_run.kafka_e2e_reading(e2e) if line]
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    assert all(line in page for line in reading)
    # a step in which cep finished no micro-batch (it fell behind) has no durations
    maxima = [s["cep_batches"]["batch_max_s"] for s in e2e["steps"] if s["cep_batches"]["batch_max_s"] is not None]
    assert f"at most {min(maxima):.1f} to {max(maxima):.1f} s" in "\n".join(reading)

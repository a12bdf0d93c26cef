"""The house rules of the layout (docs/architecture.md draws the house), checked on every import statement,
also those inside functions:

- the stages point one way: cep (the public API and the command) -> cep.spark_bridge -> cep.matcher ->
  cep.grammar; matcher/ and grammar/ never import Spark; no stage imports the public API;
- inside each package, modules and subpackages have an order (``ORDER``): nothing imports what comes
  after it, and the two engines (``pike/``, ``vector/``) never import each other;
- ``spark_bridge/engine/`` (the pure-Python keyed engine) never imports pyspark;
- no import circle; no ``_private`` name imported from a module of another package; no module reads
  another module's ``_private`` names or an object's ``__dict__`` (``REACHES_LEFT`` lists those still there);
- an import inside a function is only of a heavy or optional dependency (``LAZY``), and the module
  says why in a comment starting ``# Imported inside functions:``;
- every package folder is installed (pyproject.toml), and the module lists in the docs match the tree.
"""

import ast
import os
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# The folders of the repository and the packages they are installed as (pyproject.toml's package-dir).
FOLDERS = {folder: package for package, folder in PYPROJECT["tool"]["setuptools"]["package-dir"].items()}
STAGES = ("grammar", "matcher", "spark_bridge")
# What each stage's code may import of ours: the stages below it, and itself.
ALLOWED = {
    "grammar": ("cep.grammar",),
    "matcher": ("cep.grammar", "cep.matcher"),
    "spark_bridge": ("cep.grammar", "cep.matcher", "cep.spark_bridge"),
}
NO_SPARK = ("cep.grammar", "cep.matcher", "cep.spark_bridge.engine")
# Each package's modules and subpackages, lowest first: a member imports only members at or before its
# own place. A tuple holds siblings, which never import each other.
ORDER = {
    "cep": [
        "grammar",
        "matcher",
        "spark_bridge",
        "query",
        "duckdb_nodes",
        "duckdb_catalog",
        "duckdb_arrays",
        "duckdb_typeof",
        "duckdb_years",
        "duckdb_make",
        "duckdb_functions",
        "duckdb_decimals",
        "duckdb_literals",
        "duckdb_regex",
        "duckdb_widths",
        "duckdb_types",
        "duckdb_try_arithmetic",
        "duckdb_intervals",
        "duckdb_call_names",
        "duckdb_column_names",
        "duckdb_sql",
        "duckdb_names",
        "duckdb_results",
        "duckdb_optimizer",
        "statement_engines",
        "statement",
        "delta_io",
        "table_text",
        "cli_io",
        "logs",
        "report_charts",
        "report",
        "run_cli",
        "stream_files",
        "stream_options",
        "stream_cli",
        "status_cli",
        "cli",
    ],
    "cep.grammar": [
        "errors",
        "limits",
        "units",
        "ast",
        "columns",
        "suggestions",
        "tokens",
        "lalr",
        "syntax_errors",
        "functions",
        "type_names",
        "checks",
        "format",
        "parser",
        "statement",
    ],
    "cep.matcher": ["sql", "program", "rows", ("pike", "vector"), "plan", "explain"],
    "cep.matcher.sql": [
        ("text_patterns", "datetimes", "math_functions"),
        "values",
        "intervals",
        "context",
        "running",
        "types",
        "operators",
        "expressions",
    ],
    "cep.matcher.program": ["instructions", "lowered", "skip", "compiler", "equivalence", "output", "machine"],
    "cep.matcher.rows": ["tables", "text_types", "outer", "partitioning", "validate"],
    "cep.matcher.pike": ["vm", "trace"],
    "cep.matcher.vector": [
        "arrays",
        "kernels",
        "pattern_regex",
        "runs",
        "all_rows",
        "layout",
        "fastpath",
        "first_hit",
        "lane_frame",
        "cumulative",
        "sequence_output",
        "sequence",
        "sequence_plan",
        "decisions",
    ],
    "cep.matcher.explain": ["dot", "text"],
    "cep.spark_bridge": ["engine", "spark", "sinks", "alerting"],
    "cep.spark_bridge.engine": [
        "durations",
        "state_codec",
        "ordering",
        "match_ids",
        "keyed",
        "key_table",
        "column_table",
        "columnar",
        "local",
        "replay",
    ],
    "cep.spark_bridge.engine.columnar": [
        "rules",
        "call",
        "pieces",
        "walk",
        "output",
        "resume",
        "carry",
        "step",
        "bucket",
    ],
    "cep.spark_bridge.spark": [
        "connectors",
        ("kafka_connector", "delta_connector"),
        "columns",
        "shipping",
        "session",
        "types",
        "files",
        "buckets",
        "inputs",
        "kafka_addresses",
        "kafka_check",
        "kafka",
        "delta",
        "batch",
        "streaming",
    ],
    "cep.spark_bridge.sinks": [
        "base",
        "safe_text",
        "alerts",
        "file",
        "console",
        "dead_letters",
        "templates",
        "payloads",
        "webhook",
        "sql",
        "time_columns",
        "kafka_messages",
        "kafka",
        "delta",
        "outbox",
        "lanes",
        "fanout",
    ],
    "cep.spark_bridge.alerting": [
        "rules",
        "suppress",
        "rule_set",
        "store",
        "key_tags",
        "status",
        "alert_rows",
        "bucket_state",
        "worker",
        "query",
        "driver_state",
        "rule_watch",
        "layouts",
        "delta_restart",
        "batch_cost",
        "key_buckets",
        "late_files",
        "progress",
        "batch_writes",
        "stream",
        "metrics",
    ],
}
# Imported inside functions only: optional extras (pyspark, matplotlib, psycopg; jinja2 and prometheus_client,
# the "service" extra; confluent_kafka, the "kafka" extra) and heavy libraries that many runs never need
# (pandas, pyarrow: a list of dicts or `cep check`; rich: the progress bar; duckdb, sqlglot, plotly).
LAZY = (
    "pyspark",
    "py4j",
    "matplotlib",
    "psycopg",
    "psycopg2",
    "pandas",
    "pyarrow",
    "rich",
    "duckdb",
    "sqlglot",
    "plotly",
    "confluent_kafka",
    "jinja2",
    "prometheus_client",
    "deltalake",
)
LAZY_NOTE = "# Imported inside functions:"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the library (a package is its __init__.py)."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = module_files()


def imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, dotted name, inside a function) of every import in ``path``; ``from package import name``
    gives package.name."""
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.extend((child.lineno, f"{child.module}.{alias.name}", in_function) for alias in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return found


def target(name: str) -> str | None:
    """The module of ours an imported dotted name lands in (``cep.grammar.ast.Span`` -> ``cep.grammar.ast``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def graph() -> dict[str, set[str]]:
    return {
        module: {found for _, name, _ in imports(path) if (found := target(name)) and found != module}
        for module, path in MODULES.items()
    }


def where(module: str, line: int, name: str) -> str:
    return f"{MODULES[module].relative_to(REPO)}:{line} imports {name}"


@pytest.mark.parametrize("folder", STAGES)
def test_imports_point_one_way(folder):
    package = FOLDERS[folder]
    wrong = [
        where(module, line, name)
        for module, path in MODULES.items()
        if within(module, package)
        for line, name, _ in imports(path)
        if (within(name, "cep") and not any(within(name, allowed) for allowed in ALLOWED[folder]))
    ]
    assert wrong == []


@pytest.mark.parametrize("package", NO_SPARK)
def test_pyspark_stays_out(package):
    wrong = [
        where(module, line, name)
        for module, path in MODULES.items()
        if within(module, package)
        for line, name, _ in imports(path)
        if within(name, "pyspark") or within(name, "py4j")
    ]
    assert wrong == []


def project_python_files() -> list[Path]:
    """Every .py file of the project: hidden folders (virtual environments such as bench/.venv-flink, with
    tens of thousands of files, caches, .git) and build output are not walked into."""
    found = []
    for folder, children, names in os.walk(REPO):
        children[:] = [c for c in children if not c.startswith(".") and c not in ("build", "dist", "__pycache__")]
        found += [Path(folder) / name for name in names if name.endswith(".py")]
    return sorted(found)


def test_nothing_imports_the_former_top_level_names():
    """grammar, matcher and spark_bridge are installed under cep; PyPI's packages of those names are others'."""
    files = project_python_files()
    wrong = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path in files
        for line, name, _ in imports(path)
        if name.split(".")[0] in STAGES
    ]
    assert wrong == []


def members(package: str) -> dict[str, int]:
    """Member name -> its place in ``ORDER[package]``."""
    return {
        name: place
        for place, entry in enumerate(ORDER[package])
        for name in (entry if isinstance(entry, tuple) else (entry,))
    }


@pytest.mark.parametrize("package", sorted(ORDER))
def test_every_member_has_a_place(package):
    present = {module[len(package) + 1 :].split(".")[0] for module in MODULES if module.startswith(package + ".")}
    assert present == set(members(package))


@pytest.mark.parametrize("package", sorted(ORDER))
def test_each_package_keeps_its_order(package):
    place = members(package)
    siblings = [set(entry) for entry in ORDER[package] if isinstance(entry, tuple)]
    wrong = []
    for module, path in MODULES.items():
        if not module.startswith(package + "."):
            continue
        mine = module[len(package) + 1 :].split(".")[0]
        for line, name, _ in imports(path):
            found = target(name)
            if found is None or not found.startswith(package + "."):
                continue
            theirs = found[len(package) + 1 :].split(".")[0]
            if theirs == mine:
                continue
            if place[theirs] > place[mine] or any({mine, theirs} <= pair for pair in siblings):
                wrong.append(f"{where(module, line, name)} ({mine} may not import {theirs})")
    assert wrong == []


def test_no_import_circles():
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(edges[module]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_no_private_name_crosses_packages():
    wrong = []
    for module, path in MODULES.items():
        home = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, name, _ in imports(path):
            source, _, leaf = name.rpartition(".")
            found = target(source)
            if found is None or not leaf.startswith("_") or leaf.startswith("__"):
                continue
            if found.rpartition(".")[0] != home:
                wrong.append(where(module, line, name))
    assert wrong == []


def test_imports_inside_functions_are_heavy_or_optional_and_say_why():
    wrong = []
    for module, path in MODULES.items():
        lazy = [(line, name) for line, name, in_function in imports(path) if in_function]
        wrong += [where(module, line, name) for line, name in lazy if not any(within(name, dep) for dep in LAZY)]
        if lazy and LAZY_NOTE not in path.read_text(encoding="utf-8"):
            wrong.append(f"{path.relative_to(REPO)}: imports inside functions, and no '{LAZY_NOTE} ...' comment")
    assert wrong == []


def test_every_package_folder_is_installed():
    packages = {module for module, path in MODULES.items() if path.name == "__init__.py"}
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == packages


DOCS_WITH_MODULE_LISTS = [REPO / "README.md", REPO / "docs" / "architecture.md"]
# A module list in the docs: a line "`matcher/pike/`: `vm`, `trace` ..." (a folder, then its modules).
LISTED = re.compile(r"^[-*]?\s*`(?P<folder>[\w/]+/)`[^:\n]*:\s*(?P<modules>(?:`\w+`(?:,\s*)?)+)", re.M)


def package_of_folder(folder: str) -> str:
    """'matcher/pike/' -> 'cep.matcher.pike' (pyproject.toml's package-dir)."""
    top, *rest = folder.strip("/").split("/")
    return ".".join([FOLDERS[top], *rest])


def flat_order(package: str) -> list[str]:
    """``ORDER[package]`` as one list, siblings in the order written."""
    return [name for entry in ORDER[package] for name in (entry if isinstance(entry, tuple) else (entry,))]


@pytest.mark.parametrize("doc", DOCS_WITH_MODULE_LISTS, ids=lambda p: p.name)
def test_module_lists_in_the_docs_match_the_tree(doc):
    text = doc.read_text(encoding="utf-8")
    lists = {m["folder"]: re.findall(r"`(\w+)`", m["modules"]) for m in LISTED.finditer(text)}
    assert lists, f"{doc.name} lists no modules"
    items = re.findall(r"^- `([\w/]+/)`", text, re.M)
    assert sorted(items) == sorted(lists), f"{doc.name}: a list item the check cannot read"
    for folder, listed in lists.items():
        directory = REPO / folder
        present = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
        present |= {p.name for p in directory.iterdir() if (p / "__init__.py").exists()}
        assert set(listed) == present, f"{doc.name}: {folder}"
        ordered = [name for name in flat_order(package_of_folder(folder)) if name in present]
        assert listed == ordered, f"{doc.name}: {folder} is listed out of import order (ORDER above has it)"
    stage_folders = {
        f"{p.relative_to(REPO)}/"
        for folder in STAGES
        for p in (REPO / folder).rglob("*")
        if p.is_dir() and (p / "__init__.py").exists()
    }
    if doc.name == "architecture.md":
        assert stage_folders <= set(lists), sorted(stage_folders - set(lists))


def test_the_scan_sees_imports_inside_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from cep.query import Query\n    import pyspark.sql\n")
    assert imports(sample) == [(2, "cep.query.Query", True), (3, "pyspark.sql", True)]


# Column names are resolved by grammar/columns.py (``ColumnNames``) alone: Spark's rule, with its ambiguity
# error. Folding names elsewhere is a second resolver that drifts (first match wins, no error), so the scan
# below fails on it: any ``.casefold()`` (this code base folds only to compare names) and any ``.lower()``
# that compares or indexes names (``a.lower() == b.lower()``, ``{k.lower(): k ...}``).
# Where folding is not column-name matching, (file, function) -> why:
FOLDING_ALLOWED = {
    ("cep/statement_engines.py", "register"): "table names in DuckDB's catalogue, which DuckDB folds itself",
    ("cep/statement_engines.py", "sql"): "table names in DuckDB's catalogue, which DuckDB folds itself",
    ("spark_bridge/spark/kafka_addresses.py", "<module>"): "Kafka source option names, which Spark reads ignoring case",
    ("cep/duckdb_types.py", "annotated_types"): "the schema for sqlglot's type annotation, which folds names itself",
    ("cep/duckdb_column_names.py", "_result_columns"): "WITH queries and subqueries named in sqlglot's tree (not "
    "columns), matched without case as Spark and DuckDB match them",
}
FOLDS = ("casefold", "lower")


def _is_fold(node: ast.AST, methods: tuple[str, ...] = FOLDS) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in methods
        and not node.args
    )


def folding_sites(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each place ``source`` folds names to match them (see above)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if _is_fold(child, ("casefold",)):
                found.append((child.lineno, function))
            elif isinstance(child, ast.Compare):
                sides = [child.left, *child.comparators]
                if sum(any(_is_fold(n, ("lower",)) for n in ast.walk(side)) for side in sides) >= 2:
                    found.append((child.lineno, function))
            elif isinstance(child, ast.DictComp) and _is_fold(child.key, ("lower",)):
                found.append((child.lineno, function))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def test_column_names_are_folded_only_in_grammar_columns():
    wrong, used = [], set()
    for path in MODULES.values():
        relative = path.relative_to(REPO).as_posix()
        if relative == "grammar/columns.py":
            continue
        for line, function in folding_sites(path.read_text(encoding="utf-8")):
            if (relative, function) in FOLDING_ALLOWED:
                used.add((relative, function))
            else:
                wrong.append(f"{relative}:{line} ({function}) folds names: resolve them with ColumnNames")
    assert wrong == []
    assert set(FOLDING_ALLOWED) == used, f"allowed but folding no more: {sorted(set(FOLDING_ALLOWED) - used)}"


@pytest.mark.parametrize(
    "source, folds",
    [
        ("def f(a, b):\n    return a.casefold() == b.casefold()\n", True),
        ("def f(a, b):\n    return [c for c in a if c.lower() == b.lower()]\n", True),
        ("def f(row):\n    return {k.lower(): k for k in row}\n", True),
        ("def f(word):\n    return word.lower() in ('on', 'off')\n", False),
        ("def f(path):\n    return path.lower().endswith('.sql')\n", False),
    ],
)
def test_the_folding_scan_tells_matching_from_keywords(source, folds):
    assert bool(folding_sites(source)) == folds


# A function longer than this does more than one thing: split it by responsibility. Lines from `def` to
# its last line, docstring included (what a reader has to hold at once).
MAX_FUNCTION_LINES = 120
# Over the budget today, each being split by its owner; delete the entry when it is (a stale entry fails).
LONG_FUNCTIONS_ALLOWED: set[str] = set()


def long_functions() -> dict[str, int]:
    """'path:function' -> its length in lines, for every function of the package over the budget."""
    found = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(REPO).as_posix()}:{node.name}"] = length
    return found


def test_functions_stay_under_the_length_budget():
    found = long_functions()
    assert {name: lines for name, lines in found.items() if name not in LONG_FUNCTIONS_ALLOWED} == {}
    assert LONG_FUNCTIONS_ALLOWED <= set(found), f"split, so no longer allowed: {LONG_FUNCTIONS_ALLOWED - set(found)}"


# ------------------------------------------------------------------------------- no reaching into privates

# namedtuple's public methods are spelled with a leading underscore.
NAMEDTUPLE_API = {"_make", "_replace", "_asdict", "_fields", "_field_defaults"}
# Private names of other projects that have no public door: Spark's JVM gateway (py4j) and a librdkafka code.
THIRD_PARTY_PRIVATE = {"_jvm", "_jsparkSession", "_jdf", "_active_spark_context", "_PARTITION_EOF"}
# Reaches into another module of ours still in the code, each with the part of the work that removes it.
REACHES_LEFT: set[str] = set()


def own_private_names(tree: ast.AST) -> set[str]:
    """The ``_names`` a module defines itself: functions, classes, assigned names and attributes, fields."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if name.startswith("_")}


def private_reaches(path: Path) -> list[str]:
    """Where ``path`` reads a private name another module defines: ``from module import _name``, or
    ``obj._name`` (``obj`` not ``self`` nor ``cls``) for a ``_name`` this module does not define itself; and
    any ``obj.__dict__`` but its own."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [
                f"{node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
        elif isinstance(node, ast.Attribute):
            mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if node.attr == "__dict__" and not mine:
                found.append(f"{ast.unparse(node.value)}.__dict__")
            elif (
                node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not mine
                and node.attr not in own
                and node.attr not in NAMEDTUPLE_API | THIRD_PARTY_PRIVATE
            ):
                found.append(f"{ast.unparse(node.value)}.{node.attr}")
    return [f"{path.relative_to(REPO)}: {what}" for what in found]


def test_no_module_reads_another_modules_private_names():
    """A module talks to another through its public names: a ``_name`` (or an object's ``__dict__``) is its
    owner's to change. Same-module use (a class reading its own other instance, say) is the owner's."""
    found = {reach for path in MODULES.values() for reach in private_reaches(path)}
    assert sorted(found - REACHES_LEFT) == []
    assert sorted(REACHES_LEFT - found) == [], "gone: take them off REACHES_LEFT"

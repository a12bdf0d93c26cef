"""cep: complex event processing on Apache Spark with SQL:2016 MATCH_RECOGNIZE.

    q = cep.compile(text)      # parse, check and compile one statement (raises cep.CepError)
    q.run(rows)                # list of dicts / pandas DataFrame / pyarrow Table -> same kind
    q.on_spark(df)             # Spark DataFrame -> Spark DataFrame of matches
    cep.sql(spark, text)       # a whole Spark SQL statement with MATCH_RECOGNIZE clauses -> DataFrame
    cep.compile_sql(text).run({"t": rows})   # the same on the python engine (DuckDB around the clauses)

The stages live below this package: ``cep.grammar`` (text -> checked AST), ``cep.matcher`` (AST ->
matches) and ``cep.spark_bridge`` (the matcher inside Spark). Importing one of them runs this file
first, so it stays cheap: the errors are plain classes, and everything that pulls in the parser or the
engine is loaded on first use (PEP 562 ``__getattr__``).
"""

from importlib import import_module as _import_module

from cep.grammar.errors import CepError, CepRuntimeError, CepSemanticError, CepSyntaxError

__all__ = [
    "CepError",
    "CepRuntimeError",
    "CepSemanticError",
    "CepSyntaxError",
    "Query",
    "compile",
    "compile_all",
    "compile_sql",
    "check_sql",
    "compile_rule",
    "load_rules",
    "parse",
    "parse_all",
    "spark_cep_error",
    "sql",
]

# Public name -> the module that defines it, imported when the name is first used.
_LAZY = {
    "Query": "cep.query",
    "compile": "cep.query",
    "compile_all": "cep.query",
    "sql": "cep.statement",
    "spark_cep_error": "cep.statement_engines",
    "compile_sql": "cep.statement",
    "check_sql": "cep.statement",
    "compile_rule": "cep.query",
    "load_rules": "cep.query",
    "parse": "cep.grammar.parser",
    "parse_all": "cep.grammar.parser",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cep' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""cep: complex event processing on Apache Spark with SQL:2016 MATCH_RECOGNIZE.

    q = cep.compile(text)      # parse, check and compile one statement (raises cep.CepError)
    q.run(rows)                # list of dicts / pandas DataFrame / pyarrow Table -> same kind
    q.on_spark(df)             # Spark DataFrame -> Spark DataFrame of matches
"""


from cep.query import Query
from grammar.errors import CepError, CepRuntimeError, CepSemanticError, CepSyntaxError
from grammar.parser import parse, parse_all

__all__ = [
    "CepError",
    "CepRuntimeError",
    "CepSemanticError",
    "CepSyntaxError",
    "Query",
    "compile",
    "compile_all",
    "parse",
    "parse_all",
]


def compile(text: str, *, filename: str | None = None) -> Query:  # noqa: A001 - the natural name
    """Parse, check and compile one statement."""
    return Query(parse(text, filename=filename), text, filename)


def compile_all(text: str, *, filename: str | None = None) -> list[Query]:
    """Parse, check and compile every statement of a file (statements separated by ';')."""
    return [Query(statement, text, filename) for statement in parse_all(text, filename=filename)]

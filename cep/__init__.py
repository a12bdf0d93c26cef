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
    "sql",
]


def compile(text: str, *, filename: str | None = None) -> Query:  # noqa: A001 - the natural name
    """Parse, check and compile one statement."""
    return Query(parse(text, filename=filename), text, filename)


def compile_all(text: str, *, filename: str | None = None) -> list[Query]:
    """Parse, check and compile every statement of a file (statements separated by ';')."""
    return [Query(statement, text, filename) for statement in parse_all(text, filename=filename)]


def sql(spark, text: str, **options):
    """Run a MATCH_RECOGNIZE statement over a Spark table or (temp) view, static or streaming.

    ``FROM events`` names the table or view (``spark.table``); ``FROM 'path/to/file.parquet'`` reads a
    file (static). The options are those of ``Query.on_spark`` (``watermark``, ``session_timeout``,
    ``late``...), used when the relation is a stream. Returns a Spark DataFrame of matches.
    """
    query = Query(parse(text), text)
    relation = query.statement.relation
    if relation.is_path:
        path = relation.name
        kind = path.rsplit(".", 1)[-1].lower() if "." in path else "parquet"
        reader = spark.read.option("header", True).option("inferSchema", True) if kind == "csv" else spark.read
        df = reader.format(kind if kind in ("csv", "json", "parquet") else "parquet").load(path)
    else:
        df = spark.table(relation.name)
    return query.on_spark(df, **options)


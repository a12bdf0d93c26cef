"""What the ``cep`` commands share: reading event files (pandas and Spark readers), printing match tables
and errors, exit codes, and starting Spark."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cep.delta_io import is_delta, read_delta_arrow, snapshot_of, write_matches
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepError
from cep.grammar.parser import parse_schema
from cep.matcher.rows.tables import arrow_to_pandas, pandas_series
from cep.matcher.rows.text_types import (
    RepeatedColumnError,
    column_type,
    convert,
    declared_value,
    evidence,
    parse_timestamp,
    repeated_column,
    resolve_declared,
    string_type,
    time_is_held,
)
from cep.matcher.sql.types import decimal_params
from cep.spark_bridge.spark.columns import RAW, REJECT
from cep.spark_bridge.spark.delta import CepDeltaError, PushedFilter, read_delta
from cep.spark_bridge.spark.delta_connector import DeltaConnectorError
from cep.spark_bridge.spark.files import json_holds_array, read_files
from cep.spark_bridge.spark.inputs import dead_letter_columns, mark_bad_rows, prepare_input
from cep.spark_bridge.spark.kafka import VALUE_FORMATS, encoding_name, is_kafka_url, kafka_location, read_kafka
from cep.spark_bridge.spark.kafka_connector import KafkaConnectorError
from cep.spark_bridge.spark.session import StateStoreError, get_spark

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Imported inside functions: pandas (heavy; `cep check` never needs it) and pyspark (optional: the "spark" extra).

FORMATS = ("csv", "parquet", "json", "delta")  # delta: also named by its prefix, --input delta:PATH

EXIT_OK = 0
EXIT_QUERY_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# The input formats' file extensions: the one registry (`cep run`, `cep stream` and the folder readers).
EXTENSIONS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


class UsageError(Exception):
    """Bad arguments or an unreadable input/output file: exit code 2 with this message."""


# ----------------------------------------------------------------------------------------------- helpers


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def print_error(message: str) -> None:
    print(message, file=sys.stderr)


STDIN = "-"  # a query file named "-" is standard input, as ruff, black and psql -f read it


def read_text(path: str, what: str = "query file") -> str:
    if path == STDIN:
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"cannot read the {what} from standard input: {exc}") from None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{what} is a directory: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def format_of_name(name: str) -> str | None:
    """The input format a file's name says (``EXTENSIONS``), or None."""
    return EXTENSIONS.get(os.path.splitext(name)[1].lower())


def format_of(path: str, explicit: str | None, *, what: str) -> str:
    if is_delta(path):
        return "delta"
    if explicit:
        return explicit
    candidates = [path]
    if os.path.isdir(path):
        candidates = sorted(os.path.join(path, name) for name in os.listdir(path) if not name.startswith(("_", ".")))
    for candidate in candidates:
        fmt = format_of_name(candidate)
        if fmt is not None:
            return fmt
    raise UsageError(
        f"cannot tell the format of {what} {path} from its name; use --input-format {{{','.join(FORMATS)}}}"
        if what == "input"
        else f"cannot tell the format of {what} {path} from its extension (use .csv, .parquet or .json)"
    )


def add_input_format_option(command, choices, help: str, *, format_too: bool = True) -> None:  # noqa: A002
    """The input format option every command that reads inputs shares: ``--input-format`` (``args.input_format``),
    also spelled ``--format`` (documented first, kept) where the command has no output format of that name
    (``cep explain``'s ``--format`` is its picture's)."""
    spellings = ("--input-format", "--format") if format_too else ("--input-format",)
    command.add_argument(*spellings, dest="input_format", choices=choices, help=help)


def input_format(paths: Sequence[str], explicit: str | None) -> str:
    for path in paths:
        if not is_delta(path) and explicit != "delta" and not os.path.exists(path):
            raise UsageError(f"input file not found: {path}")
    formats = {format_of(path, explicit, what="input") for path in paths}
    if len(formats) > 1:
        raise UsageError(
            f"the inputs mix formats ({', '.join(sorted(formats))}); give one --input-format for all, or run them "
            "separately"
        )
    return formats.pop()


# ------------------------------------------------------------------------------------------- inputs

_NAMED = re.compile(r"^([A-Za-z_][\w.]*)=(.+)$", re.S)
INPUT_HELP = (
    "input file (or Spark directory): without NAME=, the table the first MATCH_RECOGNIZE reads (repeat "
    "for several files of one format); NAME=PATH: the table NAME. Default: the files the query names "
    "(FROM 'data/ticks.csv')"
)
SCHEMA_HELP = (
    "the types of a CSV input's columns, e.g. 'ts TIMESTAMP, d DATE' for the unnamed --input, "
    "NAME='d DATE' for --input NAME=PATH (repeat for each); other columns are typed by their values, and a "
    "value of another type is a bad row (--dead-letter)"
)


@dataclass(frozen=True)
class Inputs:
    """The ``--input`` and ``--schema`` options every command that reads event files shares (``cep run``,
    ``trace``, ``report``, ``explain``): the unnamed files (one table: the one the first MATCH_RECOGNIZE
    reads), the named tables, and the declared CSV column types of each (key None: the unnamed input)."""

    unnamed: tuple[str, ...] = ()
    named: dict[str, str] = dataclasses.field(default_factory=dict)
    schemas: dict[str | None, dict[str, str]] = dataclasses.field(default_factory=dict)
    format: str | None = None  # --format, else each file's extension

    @classmethod
    def parse(
        cls, options: Sequence[str] | None, schemas: Sequence[str] | str | None = None, fmt: str | None = None
    ) -> Inputs:
        """``--input`` values (``NAME=PATH`` names a table unless a file has that very name) and ``--schema``
        values (``'COLUMNS'`` for the unnamed input, ``NAME='COLUMNS'`` for a named one)."""
        unnamed, named = [], {}
        for option in options or ():
            found = _NAMED.match(option)
            if found and not os.path.exists(option):
                name, path = found.group(1), found.group(2)
                twin = ColumnNames(named).find_name(name)  # a table's name resolves as a column's does
                if twin is not None:  # the second would silently win
                    raise UsageError(
                        f"two --input are named {name}: {twin}={named[twin]} and {option}; a name takes one "
                        "path, so give each table its own name"
                    )
                named[name] = path
            else:
                unnamed.append(option)
        inputs = cls(tuple(unnamed), named, {}, fmt)
        texts = [schemas] if isinstance(schemas, str) else list(schemas or ())
        return dataclasses.replace(inputs, schemas=inputs._declared(texts))

    def _declared(self, texts: list[str]) -> dict[str | None, dict[str, str]]:
        declared: dict[str | None, dict[str, str]] = {}
        for text in texts:
            found = _NAMED.match(text)  # column lists hold no "=": NAME=COLUMNS or COLUMNS
            key = found.group(1) if found else None
            columns = found.group(2) if found else text
            if key is not None and key not in self.named:
                named = ", ".join(self.named) or "none"
                raise UsageError(
                    f"--schema {key}=...: no --input is named {key} (named inputs: {named}); "
                    "the unnamed --input's types are given without a name: --schema 'd DATE, ...'"
                )
            if key is None and not self.unnamed:
                if len(self.named) != 1:
                    names = ", ".join(self.named) or "none"
                    raise UsageError(
                        f"--schema '{columns}' types the unnamed --input, and there is none; for a named "
                        f"input write --schema NAME='{columns}' (named inputs: {names})"
                    )
                key = next(iter(self.named))
            if key in declared:
                which = f"input {key}" if key else "the unnamed input"
                raise UsageError(f"two --schema for {which}: give its columns in one")
            paths = list(self.unnamed) if key is None else [self.named[key]]
            if not all(is_kafka_url(path) for path in paths) and input_format(paths, self.format) != "csv":
                which = "the unnamed input" if key is None else key
                raise UsageError(
                    "--schema types the columns of a CSV input (or of a Kafka message value): "
                    f"{which} is not CSV, and JSON and Parquet files carry their own types"
                )
            try:
                declared[key] = parse_schema(columns)
            except CepError as exc:
                raise UsageError(f"invalid --schema:\n{exc}") from None
        return declared

    def unnamed_format(self) -> str | None:
        return input_format(list(self.unnamed), self.format) if self.unnamed else None

    def read_pandas(self) -> tuple[pd.DataFrame | None, dict[str, pd.DataFrame]]:
        """(the unnamed input or None, the named tables), read by the python engine's reader."""
        default = None
        if self.unnamed:
            default = read_pandas(list(self.unnamed), self.unnamed_format(), self.schemas.get(None))
        return default, {name: self.read_named_pandas(name) for name in self.named}

    def read_named_pandas(
        self, name: str, columns: Sequence[str] | None = None, filters: Sequence[PushedFilter] = ()
    ) -> pd.DataFrame:
        path = self.named[name]
        fmt = input_format([path], self.format)
        return read_pandas([path], fmt, self.schemas.get(name), columns=columns, filters=filters)

    def read_named_spark(
        self, spark: Any, name: str, columns: Sequence[str] | None = None, filters: Sequence[PushedFilter] = ()
    ) -> Any:
        path = self.named[name]
        fmt = input_format([path], self.format)
        return read_spark(spark, [path], fmt, self.schemas.get(name), columns=columns, filters=filters)


def statement_inputs(statement: Any, inputs: Inputs, *, position: int = 0) -> tuple[Any, pd.DataFrame]:
    """(the Query of the statement's clause at ``position``, the rows it reads), on the python engine: the
    inputs read as ``cep run`` reads them and the SQL around the clause run (a subquery, a WITH, a join),
    so that ``cep trace`` and ``cep report`` look at what the clause sees in ``cep run``."""
    default, tables = inputs.read_pandas()

    def read_path(path: str):
        return read_pandas([path], input_format([path], inputs.format))

    return statement.clause_input(tables, default=default, read_path=read_path, position=position)


# ------------------------------------------------------------------------------------ reading: pandas


def _naive_utc(series: pd.Series) -> pd.Series:
    if getattr(series.dt, "tz", None) is not None:
        return series.dt.tz_convert("UTC").dt.tz_localize(None)
    return series


def infer_datetimes(pdf: pd.DataFrame) -> pd.DataFrame:
    """Time-zone-aware datetime columns as naive UTC (what Spark's session gives), and each text column
    whose every non-null value is an ISO 8601 date or time as datetime64 (``text_types.string_type``)."""
    import pandas as pd

    for name in pdf.columns:
        series = pdf[name]
        if pd.api.types.is_datetime64_any_dtype(series):
            pdf[name] = _naive_utc(series)
            continue
        if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
            continue
        values = [None if missing else value for value, missing in zip(series.tolist(), series.isna().tolist())]
        if values and all(isinstance(v, str) for v in values if v is not None):
            if string_type(evidence(values)) == "TIMESTAMP":
                pdf[name] = _typed_series(_times_or_text(values), "TIMESTAMP")
    return pdf


def input_files(path: str, fmt: str) -> list[str]:
    """The files a CSV or JSON input names: the file itself, or a directory's data files (a Spark output
    directory: its part files, not the ``_SUCCESS`` and hidden ones)."""
    if not os.path.isdir(path):
        return [path]
    return sorted(
        os.path.join(path, name)
        for name in os.listdir(path)
        if not name.startswith(("_", ".")) and format_of_name(name) == fmt
    )


def read_pandas(
    paths: Sequence[str],
    fmt: str,
    declared: dict[str, str] | None = None,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[PushedFilter] = (),
) -> pd.DataFrame:
    """Read the inputs with pandas/pyarrow (the python engine), as ``read_spark`` reads them: CSV by RFC 4180
    with the column types of ``cep.matcher.rows.text_types``, JSON with its own types (ISO 8601 strings as
    timestamps), Parquet as it is; integers, floats and booleans with a NULL in pandas' nullable dtypes, so
    that no value changes on the way (docs/cli.md, "How files are read"). ``declared``: a CSV's column
    types given by ``--schema`` (a value that is not of its type stays text, for the row checks). A Delta
    table is read as its Parquet files are (``delta_io``); ``columns``: only those of it; ``filters``: only its
    rows that meet them (``delta_io.pushed_filters``)."""
    import pandas as pd

    if fmt == "delta":
        frames = [infer_datetimes(_decimals_typed(_read_delta(path, columns, filters))) for path in paths]
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if fmt == "parquet":
        frames = [_once_each(path, _read_file(path, fmt, _read_parquet)) for path in paths]
        pdf = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        return infer_datetimes(pdf)
    files = [file for path in paths for file in input_files(path, fmt)]
    if not files:
        raise UsageError(f"input {paths[0]} holds no .{fmt} files")
    if fmt == "csv":
        texts = [_read_file(file, fmt, _read_csv_text) for file in files]
        text = texts[0] if len(texts) == 1 else pd.concat(texts, ignore_index=True)
        try:
            declared = resolve_declared(declared or {}, list(text.columns))
        except ValueError as exc:
            raise UsageError(f"--schema: {exc}") from None
        return pd.DataFrame(
            {name: _csv_column(text[name], declared.get(name)) for name in text.columns}, index=text.index
        )
    rows: list[dict] = []
    for file in files:
        rows.extend(_read_file(file, fmt, _read_json_rows))
    if not rows:
        raise UsageError(f"input {paths[0]} is empty: no rows, so no columns to match")
    return _once_each(paths[0], _json_frame(rows))


def _once_each(path: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (a JSON or Parquet input) when it names each column once, ignoring case, as a CSV header
    must: DuckDB would read ``v`` and ``V`` as ``v`` and ``V_1`` where Spark refuses the file."""
    repeated = repeated_column(list(frame.columns), where="the file")
    if repeated:
        raise UsageError(f"input {path}: {repeated}")
    return frame


def _read_file(path: str, fmt: str, reader):
    try:
        return reader(path)
    except UsageError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
        raise UsageError(
            f"cannot read input {path} as {fmt}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    except Exception as exc:  # pyarrow and pandas parser errors have many types
        raise UsageError(f"cannot read input {path} as {fmt}: {type(exc).__name__}: {exc}") from None


def _read_delta(path: str, columns: Sequence[str] | None, filters: Sequence[PushedFilter]) -> Any:
    try:
        return read_delta_arrow(snapshot_of(path), columns, filters)
    except (CepDeltaError, RuntimeError) as exc:
        raise UsageError(str(exc)) from None


def _read_parquet(path: str) -> pd.DataFrame:
    import pyarrow.parquet as pq

    return _decimals_typed(pq.read_table(path))


def _decimals_typed(table) -> pd.DataFrame:
    """``arrow_to_pandas(table)`` with each DECIMAL column kept in its Arrow type (``pd.ArrowDtype``), so the
    python engine knows its precision and scale and gives Spark's decimal result types, as Spark does."""
    import pandas as pd
    import pyarrow.types as t

    frame = arrow_to_pandas(table)
    for index, field in enumerate(table.schema):
        if t.is_decimal(field.type):
            frame.isetitem(index, table.column(index).to_pandas(types_mapper=pd.ArrowDtype))
    return frame


def _read_csv_text(path: str) -> pd.DataFrame:
    """A CSV file's fields as text (RFC 4180: quoted fields with ``""`` and line breaks), an empty field NULL."""
    import pandas as pd

    try:
        header = pd.read_csv(path, dtype=str, header=None, nrows=1, keep_default_na=False, encoding="utf-8")
        repeated = repeated_column(header.iloc[0].tolist()) if len(header) else None
        if repeated:
            raise UsageError(f"input {path}: {repeated}")
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise UsageError(f"input {path} is empty: no header, no rows") from None


def _csv_column(text: pd.Series, declared: str | None = None) -> pd.Series:
    values = [None if missing else value for value, missing in zip(text.tolist(), text.isna().tolist())]
    if declared is not None:
        typed = [None if v is None else declared_value(v, declared) for v in values]
        fits = declared == "VARCHAR" or not any(isinstance(v, str) for v in typed)
        # a value that is not of its type stays text: the column is then one of mixed values (object)
        return _typed_series(typed, declared if fits else "VARCHAR")
    type_name = column_type(evidence(values))
    return _typed_series([None if v is None else convert(v, type_name) for v in values], type_name)


# A declared integer type narrower than a BIGINT -> its pandas dtype (nullable, of the type's width).
_DECLARED_INTEGER_DTYPES = {"INTEGER": "Int32", "SMALLINT": "Int16", "TINYINT": "Int8"}


def _typed_series(values: list, type_name: str) -> pd.Series:
    import pandas as pd

    if type_name == "TIMESTAMP":
        # A time pandas cannot hold keeps its text, so the row checks set it aside as a bad row
        # (text_types.FIRST_HELD_TIME says why), and the other rows keep their times.
        held = [v.isoformat() if isinstance(v, datetime) and not time_is_held(v) else v for v in values]
        if any(isinstance(v, str) for v in held):
            return pd.Series(held, dtype=object)
        return pd.Series(held, dtype="datetime64[ns]")
    if type_name == "DATE":  # datetime.date values (pandas has no date dtype): pandas_schema reads them as DATE
        return pd.Series(values, dtype=object)
    if type_name in _DECLARED_INTEGER_DTYPES:  # a declared INT, SMALLINT or TINYINT: its width, as Spark's reader
        return pd.Series(values, dtype=_DECLARED_INTEGER_DTYPES[type_name])  # gives it (its arithmetic is its type's)
    if type_name in ("BIGINT", "DOUBLE", "BOOLEAN"):
        return pandas_series(values)
    size = decimal_params(type_name)
    if size is not None:  # the DECIMAL type Spark reads the column as (files._spark_type), precision and scale kept
        import pyarrow as pa

        return pd.Series(pa.array(values, pa.decimal128(*size)), dtype=pd.ArrowDtype(pa.decimal128(*size)))
    return pd.Series(values, dtype=object)


def _times_or_text(values: list) -> list:
    """The strings of a TIMESTAMP column as times; one that is no time keeps its text (a bad row)."""
    return [None if v is None else parse_timestamp(v) or v for v in values]


def _read_json_rows(path: str) -> list[dict]:
    """The objects of a JSON-lines file, or of a file holding one array of them."""
    with open(path, encoding="utf-8") as fh:
        if json_holds_array(path):
            try:
                items = json.load(fh)
            except json.JSONDecodeError as exc:
                raise UsageError(f"cannot read input {path} as json: {exc}") from None
            numbered = list(enumerate(items if isinstance(items, list) else [items], 1))
            where = "item"
        else:
            numbered = []
            for number, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        numbered.append((number, json.loads(line)))
                    except json.JSONDecodeError as exc:
                        raise UsageError(
                            f"cannot read input {path} as json: line {number} is not JSON ({exc.msg})"
                        ) from None
            where = "line"
    for number, item in numbered:
        if not isinstance(item, dict):
            raise UsageError(
                f"cannot read input {path} as json: {where} {number} is {type(item).__name__}, not an object"
            )
    return [item for _, item in numbered]


def _json_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows of JSON objects as a frame, columns sorted by name: each value keeps its JSON type (a string
    stays a string: "1e3" and "1000" are two values); a column of strings that are all ISO 8601 times is
    TIMESTAMP."""
    import pandas as pd

    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    columns = {}
    # In the order Spark's JSON reader gives a file's columns (sorted by name, as Java compares strings: by
    # UTF-16 code unit), so that `SELECT *` lists them alike on both engines.
    for name in sorted(names, key=lambda n: n.encode("utf-16-be", "surrogatepass")):
        values = [row.get(name) for row in rows]
        present = {type(v) for v in values} - {type(None)}
        if present == {str} and string_type(evidence(values)) == "TIMESTAMP":
            columns[name] = _typed_series(_times_or_text(values), "TIMESTAMP")
        elif present <= {int, float} or present == {bool}:
            columns[name] = pandas_series(values)
        else:
            columns[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)))


def pandas_schema(pdf: pd.DataFrame) -> dict[str, str | None]:
    """The SQL type of each column of a frame, as ``cep check --schema`` spells them; None where a column's
    values mix types or it has none (the checker then knows the column but not its type)."""
    import pandas as pd

    kinds = (
        (bool, "BOOLEAN"),
        (int, "BIGINT"),
        (float, "DOUBLE"),
        (Decimal, "DECIMAL"),
        (str, "VARCHAR"),
        (datetime, "TIMESTAMP"),
        (date, "DATE"),
    )
    schema: dict[str, str | None] = {}
    for name in pdf.columns:
        series = pdf[name]
        if pd.api.types.is_bool_dtype(series):
            schema[str(name)] = "BOOLEAN"
        elif pd.api.types.is_integer_dtype(series):
            schema[str(name)] = "BIGINT"
        elif pd.api.types.is_float_dtype(series):
            schema[str(name)] = "DOUBLE"
        elif pd.api.types.is_datetime64_any_dtype(series):
            schema[str(name)] = "TIMESTAMP"
        else:
            found = {next((sql for python, sql in kinds if isinstance(v, python)), None) for v in series.dropna()}
            schema[str(name)] = found.pop() if len(found) == 1 else None
    return schema


def input_schema(paths: Sequence[str], fmt: str) -> dict[str, str | None]:
    """The column types of input files as the python engine reads them (``cep check --input``, ``cep run``)."""
    return pandas_schema(read_pandas(paths, fmt))


# ------------------------------------------------------------------------------------- reading: Spark


def read_spark(
    spark: Any,
    paths: Sequence[str],
    fmt: str,
    declared: dict[str, str] | None = None,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[PushedFilter] = (),
) -> Any:
    """Read the inputs with ``spark.read`` (the spark engine), as ``read_pandas`` reads them
    (``cep.spark_bridge.spark.files``); ``declared``, ``columns`` and ``filters`` as there."""
    if fmt == "delta":
        try:
            frames = [read_delta(spark, snapshot_of(path), columns, filters) for path in paths]
        except CepDeltaError as exc:
            raise UsageError(str(exc)) from None
        return functools.reduce(lambda a, b: a.unionByName(b), frames)
    try:
        df = read_files(spark, list(paths), fmt, declared=declared)
    except RepeatedColumnError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # the declared columns (resolve_declared)
        raise UsageError(f"--schema: {exc}") from None
    except Exception as exc:
        if type(exc).__name__ in (
            "AnalysisException",
            "SparkRuntimeException",
            "IllegalArgumentException",
            "PythonException",
            "Py4JJavaError",
        ):
            message = f"cannot read input as {fmt}: {first_line(str(exc))}"
            if "TIMESTAMP(NANOS" in str(exc):
                message += (
                    "\nSpark cannot read nanosecond timestamps: write the file with micro- or millisecond ones "
                    "(pandas: to_parquet(..., coerce_timestamps='us')), or use --engine python"
                )
            raise UsageError(message) from None
        raise
    if not df.columns or (len(df.columns) == 1 and df.columns[0] == "_corrupt_record"):
        raise UsageError(f"input {paths[0]} is empty: no rows, so no columns to match")
    return df


def spark_result(df: Any) -> pd.DataFrame:
    """A Spark result as pandas, through Arrow so that no value changes (``arrow_to_pandas``: a NULL stays
    apart from a NaN, an integer column with a NULL stays integers), its times as naive UTC."""
    pdf = arrow_to_pandas(df.toArrow())
    for index in range(len(pdf.columns)):
        column = pdf.iloc[:, index]
        if getattr(getattr(column, "dt", None), "tz", None) is not None:
            pdf.isetitem(index, _naive_utc(column))
    return pdf


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank; with the next one when it ends in ':' (Spark's "You may
    get a different result due to the upgrading to Spark >= 3.0:" says what went wrong on its next line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return text.strip()
    # A traceback's header is not what went wrong (spark_error finds that at the traceback's end).
    joined = len(lines) > 1 and lines[0].endswith(":") and not lines[1].startswith("Traceback (")
    return f"{lines[0]} {lines[1]}" if joined else lines[0]


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formulas(pdf: pd.DataFrame) -> pd.DataFrame:
    """``pdf`` with a ``'`` before every text value (and column name) that starts like a formula; numbers,
    times and other values are untouched."""

    def safe(value: Any) -> Any:
        return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    out = pdf.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].map(safe)
    out.columns = [safe(str(c)) for c in out.columns]
    return out


def write_output(pdf: pd.DataFrame, path: str, *, keep_formulas: bool = False, app_id: str = "cep-run") -> bool:
    """Write ``pdf`` as CSV, Parquet or JSON lines (by the extension), or append it to a Delta table
    (``delta:PATH``, once per ``app_id``: ``delta_io.write_matches``). In CSV, text that a spreadsheet
    would run as a formula is written with a leading ``'`` unless ``keep_formulas``. False: the Delta table
    holds that run's rows already."""
    fmt = format_of(path, None, what="output file")
    try:
        if fmt == "delta":
            return write_matches(pdf, path, app_id)
        if fmt == "csv":
            (pdf if keep_formulas else neutralise_formulas(pdf)).to_csv(path, index=False)
        elif fmt == "parquet":
            # Microseconds: Spark cannot read the nanosecond timestamps pandas writes by default.
            pdf.to_parquet(path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)
        else:
            write_json_lines(pdf, path)
    except (OSError, ValueError, ImportError, RuntimeError) as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None
    return True


def write_json_lines(pdf: pd.DataFrame, path: str) -> None:
    """One JSON object per row, every value exact: a float as the shortest text that reads back as the
    same float (``repr``; NaN and the infinities as ``NaN``, ``Infinity``, ``-Infinity``, which Python's
    and Spark's JSON readers read back, strict ones do not), a DECIMAL as its digits, times in ISO 8601."""
    names = [str(name) for name in pdf.columns]
    with open(path, "w", encoding="utf-8") as fh:
        for record in pdf.itertuples(index=False, name=None):
            fields = (
                f"{json.dumps(name, ensure_ascii=False)}: {json_value(value)}" for name, value in zip(names, record)
            )
            fh.write("{" + ", ".join(fields) + "}\n")


def json_value(value: Any) -> str:
    """A value as JSON text (see ``write_json_lines``)."""
    if value is None or value is _pandas_missing():
        return "null"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else json.dumps(str(value))
    if hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:  # numpy scalars
        value = value.item()
    if isinstance(value, float):
        return json.dumps(value)  # repr: exact; NaN and inf as Python's json writes them
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (datetime, date)):
        return json.dumps(value.isoformat())
    if isinstance(value, timedelta):
        import pandas as pd

        return json.dumps(pd.Timedelta(value).isoformat())
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {json_value(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return "[" + ", ".join(json_value(item) for item in items) + "]"
    if value != value:  # NaT
        return "null"
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def _pandas_missing():
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        return None
    return pd.NA


def write_dead_letter(records: Sequence[dict], path: str) -> None:
    """The dead-letter records of ``Query.run(dead_letter=...)`` as JSON lines (values as text where JSON
    has no type)."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write the dead letter {path}: {exc}") from None


def bad_rows_summary(by_reason: dict[str, int], path: str) -> str:
    """The summary line of the rows set aside: 'bad rows: 2 (null_event_time 1, wrong_type 1) -> bad.jsonl'."""
    total = sum(by_reason.values())
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(by_reason.items()))
    return f"bad rows: {total}" + (f" ({reasons})" if reasons else "") + f" -> {path}"


@dataclass(frozen=True)
class KafkaInput:
    """A ``kafka://`` input of ``cep run``: the messages the topics hold now, read once through Spark."""

    url: str
    format: str = "json"
    schema: str | None = None
    options: tuple[str, ...] = ()
    encoding: str = "utf-8"


def kafka_input(
    paths: Sequence[str],
    fmt: str | None,
    schema: str | None,
    options: Sequence[str] | None,
    encoding: str | None = None,
) -> KafkaInput | None:
    """The ``kafka://`` input among ``--input`` values (None when they are files); one topic address only."""
    urls = [p for p in paths if is_kafka_url(p)]
    if not urls:
        if options or encoding:  # (--schema also types a CSV file: cep.run_cli)
            flag = "--kafka-option" if options else "--kafka-encoding"
            raise UsageError(f"{flag} is for a Kafka input (--input kafka://HOST:PORT/TOPIC)")
        return None
    if len(paths) > 1:
        raise UsageError("a kafka:// input is read alone: give one --input (several topics: kafka://HOST:PORT/A,B)")
    if fmt not in (None, *VALUE_FORMATS):
        raise UsageError(f"--format {fmt}: a Kafka message value is read as {' or '.join(VALUE_FORMATS)}")
    try:
        encoding = encoding_name(encoding)
    except CepError as err:
        raise UsageError(err.message) from None
    return KafkaInput(urls[0], fmt or "json", schema, tuple(options or ()), encoding)


def read_kafka_static(spark: Any, source: KafkaInput) -> Any:
    """The messages the topics hold now (earliest to latest offsets, unless the options say otherwise), as a
    static DataFrame: the value's fields, the message's ``kafka_*`` columns, ``_corrupt_record``. Raises
    CepKafkaError (E049x) for a missing topic or unreachable brokers."""
    return read_kafka(
        spark,
        source.url,
        schema=source.schema,
        format=source.format,
        options=list(source.options),
        streaming=False,
        encoding=source.encoding,
    )


def set_aside_bad_rows(events: Any, time_column: str | None) -> tuple[Any, Any]:
    """(good rows, bad rows) of a static Kafka read: bad messages (not JSON, a value of the wrong type, a time
    that does not parse, no event time) set aside exactly as ``cep stream`` sets them aside, so that a replay
    matches what the stream matched. The bad rows are dead-letter records (``inputs.DEAD_LETTER_NAMES``,
    ``_cep_file`` = topic-partition@offset). Cached: both come from one read of the topics."""
    from pyspark.sql import functions as F

    marked = mark_bad_rows(prepare_input(events), time_column, null_time=True).persist()
    good = marked.where(F.col(REJECT).isNull()).drop(REJECT, RAW)
    bad = marked.where(F.col(REJECT).isNotNull()).select(*dead_letter_columns(file=kafka_location()))
    return good, bad


def start_spark(
    master: str,
    *,
    kafka: bool = False,
    delta: bool = False,
    python_env: str | None = None,
    jvm_options: Sequence[str] = (),
) -> Any:
    """The session of a command; ``kafka``: with Spark's Kafka connector (fetched once, see kafka_connector);
    ``delta``: with Delta Lake's (delta_connector); ``python_env``: a packed Python environment for a cluster's
    executors; ``jvm_options``: flags for its driver JVM (``session.STREAM_JVM_OPTIONS``)."""
    try:
        return get_spark(master, kafka=kafka, delta=delta, python_env=python_env, jvm_options=jvm_options)
    except (KafkaConnectorError, DeltaConnectorError, StateStoreError) as exc:
        raise UsageError(str(exc)) from None
    except CepError as err:  # the executors cannot run cep (shipping.ShippingError): its message says what to do
        raise UsageError(str(err)) from None
    except ImportError as exc:
        raise UsageError(
            f"the spark engine needs pyspark ({exc}); pip install 'cep-spark[spark]', or use --engine python"
        ) from None
    except Exception as exc:
        raise UsageError(
            f"could not start Spark ({first_line(str(exc))}).\n"
            "Spark needs Java 17 or newer on PATH (e.g. apt-get install openjdk-17-jre-headless); "
            "or run with --engine python"
        ) from None


def spark_error(exc: BaseException) -> str | None:
    """The cep error inside a Spark failure (raised in a worker), or a short message; None if not Spark's."""
    name = type(exc).__name__
    if name not in (
        "PythonException",
        "Py4JJavaError",
        "SparkRuntimeException",
        "AnalysisException",
        "PySparkException",
    ) and not type(exc).__module__.startswith(("pyspark", "py4j")):
        return None
    text = str(exc)
    found = None
    for match in re.finditer(r"(?:^|\n)\s*(?:[\w.]+\.)?(Cep\w*Error): (.*?)(?=\n\S|\Z)", text, re.S):
        found = match.group(2).strip()
    if found:
        # The worker rendered the error against "query"; keep its code and message.
        rendered = re.match(r"^\S*?:(?:\d+:\d+:)? (error\[E\d+\]: .*)", found, re.S)
        return rendered.group(1) if rendered else f"error: {found}"
    # A Python error in a worker arrives as "An exception was thrown from the Python worker:" and a
    # traceback; its last "SomeError: message" line is the part that says what went wrong.
    raised = re.findall(r"^(\w+(?:Error|Exception): .+)$", text, re.M)
    detail = first_line(text) + (
        f" {raised[-1].strip()}" if raised and raised[-1].strip() not in first_line(text) else ""
    )
    return f"error: spark: {detail}"

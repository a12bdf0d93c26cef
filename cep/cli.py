"""The ``cep`` command: run, check, format and explain MATCH_RECOGNIZE queries.

    cep run QUERY_FILE --input PATH [--input PATH ...] [--engine spark|python] [--output FILE] ...
    cep check FILE ... [--schema 'ts TIMESTAMP, symbol STRING, price DOUBLE']
    cep fmt FILE
    cep explain FILE [--format text|dot|svg|png] [--output FILE]
    cep trace QUERY_FILE --input PATH [--partition COLUMN=VALUE ...] [--from X] [--to X] [--events KINDS]
    cep report QUERY_FILE --input PATH --out report.html [--column NAME] [--partitions N]

Exit codes: 0 ok; 1 the query is wrong (the rendered error goes to stderr, never a traceback);
2 bad usage, an input/output file that cannot be read or written, or a missing helper program
(Graphviz's ``dot`` for svg/png) or library (matplotlib for ``report``); 130 interrupted.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

EXIT_OK = 0
EXIT_QUERY_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

FORMATS = ("csv", "parquet", "json")
_EXTENSIONS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}

# A value that looks like an ISO-8601 date or timestamp (what a CSV or JSON column of times holds).
_ISO_DATETIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?$"
)


class UsageError(Exception):
    """Bad arguments or an unreadable input/output file: exit code 2 with this message."""


# ----------------------------------------------------------------------------------------------- helpers


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _read_text(path: str, what: str = "query file") -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{what} is a directory: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def _format_of(path: str, explicit: str | None, *, what: str) -> str:
    if explicit:
        return explicit
    candidates = [path]
    if os.path.isdir(path):
        candidates = sorted(
            os.path.join(path, name) for name in os.listdir(path) if not name.startswith(("_", "."))
        )
    for candidate in candidates:
        ext = os.path.splitext(candidate)[1].lower()
        if ext in _EXTENSIONS:
            return _EXTENSIONS[ext]
    raise UsageError(
        f"cannot tell the format of {what} {path} from its name; use --format {{{','.join(FORMATS)}}}"
        if what == "input"
        else f"cannot tell the format of {what} {path} from its extension (use .csv, .parquet or .json)"
    )


def _input_format(paths: Sequence[str], explicit: str | None) -> str:
    for path in paths:
        if not os.path.exists(path):
            raise UsageError(f"input file not found: {path}")
    formats = {_format_of(path, explicit, what="input") for path in paths}
    if len(formats) > 1:
        raise UsageError(f"the inputs mix formats ({', '.join(sorted(formats))}); give one --format for all, or run them separately")
    return formats.pop()


def _json_is_array(path: str) -> bool:
    """A JSON file holding one array (rather than one object per line)."""
    target = path
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.lower().endswith(tuple(_EXTENSIONS)))
        if not files:
            return False
        target = files[0]
    with open(target, encoding="utf-8") as fh:
        while True:
            ch = fh.read(1)
            if not ch or not ch.isspace():
                return ch == "["


# ------------------------------------------------------------------------------------ reading: pandas


def _naive_utc(series: "pd.Series") -> "pd.Series":
    if getattr(series.dt, "tz", None) is not None:
        return series.dt.tz_convert("UTC").dt.tz_localize(None)
    return series


def infer_datetimes(pdf: "pd.DataFrame") -> "pd.DataFrame":
    """Turn each text column whose every non-null value is an ISO-8601 date/time into datetime64 (naive UTC)."""
    import pandas as pd

    for name in pdf.columns:
        series = pdf[name]
        if pd.api.types.is_datetime64_any_dtype(series):
            pdf[name] = _naive_utc(series)
            continue
        if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
            continue
        values = series.dropna()
        if values.empty or not all(isinstance(v, str) and _ISO_DATETIME.match(v.strip()) for v in values):
            continue
        try:
            parsed = pd.to_datetime(series.str.strip(), format="ISO8601", utc=True)
        except (ValueError, TypeError, OverflowError):
            continue
        pdf[name] = parsed.dt.tz_localize(None)
    return pdf


def read_pandas(paths: Sequence[str], fmt: str) -> "pd.DataFrame":
    """Read the inputs with pandas/pyarrow (the python engine)."""
    import pandas as pd

    frames = []
    for path in paths:
        try:
            if fmt == "csv":
                frame = pd.read_csv(path)
            elif fmt == "parquet":
                frame = pd.read_parquet(path)
            else:
                frame = pd.read_json(path, lines=not _json_is_array(path), convert_dates=False)
        except (OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
            raise UsageError(f"cannot read input {path} as {fmt}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        except Exception as exc:  # pyarrow and pandas parser errors have many types
            raise UsageError(f"cannot read input {path} as {fmt}: {type(exc).__name__}: {exc}") from None
        frames.append(frame)
    pdf = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return infer_datetimes(pdf)


# ------------------------------------------------------------------------------------- reading: Spark


def read_spark(spark: Any, paths: Sequence[str], fmt: str) -> Any:
    """Read the inputs with ``spark.read`` (the spark engine); ISO text columns of JSON become timestamps."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    try:
        if fmt == "csv":
            df = spark.read.option("header", True).option("inferSchema", True).csv(list(paths))
            df = _keep_text_that_is_not_a_time(spark, df, paths)
        elif fmt == "parquet":
            df = spark.read.parquet(*paths)
        else:
            df = spark.read.option("multiLine", _json_is_array(paths[0])).json(list(paths))
            strings = [f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType)]
            if strings:
                # A text column becomes a timestamp when every non-null value parses (as in read_pandas).
                checks = [
                    F.sum(
                        F.when(F.col(_q(c)).isNotNull() & F.try_to_timestamp(F.col(_q(c))).isNull(), 1).otherwise(0)
                    ).alias(f"bad{i}")
                    for i, c in enumerate(strings)
                ] + [F.count(F.col(_q(c))).alias(f"n{i}") for i, c in enumerate(strings)]
                row = df.agg(*checks).collect()[0]
                for i, c in enumerate(strings):
                    if row[f"n{i}"] and not row[f"bad{i}"]:
                        df = df.withColumn(c, F.try_to_timestamp(F.col(_q(c))))
    except Exception as exc:
        if type(exc).__name__ in ("AnalysisException", "SparkRuntimeException", "IllegalArgumentException", "PythonException", "Py4JJavaError"):
            message = f"cannot read input as {fmt}: {_first_line(str(exc))}"
            if "TIMESTAMP(NANOS" in str(exc):
                message += (
                    "\nSpark cannot read nanosecond timestamps: write the file with micro- or millisecond ones "
                    "(pandas: to_parquet(..., coerce_timestamps='us')), or use --engine python"
                )
            raise UsageError(message) from None
        raise
    if not df.columns or (len(df.columns) == 1 and df.columns[0] == "_corrupt_record"):
        raise UsageError(f"cannot read input {paths[0]} as {fmt}: no columns found")
    return df


def _keep_text_that_is_not_a_time(spark: Any, df: Any, paths: Sequence[str]) -> Any:
    """Spark's CSV inference takes text such as 'T02' (a sensor id) for a time of today; a column is a
    timestamp only when every value is an ISO-8601 date/time, as in ``infer_datetimes``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    time_types = (T.TimestampType, T.TimestampNTZType, T.DateType)
    times = [f.name for f in df.schema.fields if isinstance(f.dataType, time_types)]
    if not times:
        return df
    raw = spark.read.option("header", True).csv(list(paths))  # every column as text
    checks = [
        F.sum(F.when(F.col(_q(c)).isNotNull() & ~F.trim(F.col(_q(c))).rlike(_ISO_DATETIME.pattern), 1).otherwise(0)).alias(f"bad{i}")
        for i, c in enumerate(times)
    ]
    row = raw.agg(*checks).collect()[0]
    wrong = {c for i, c in enumerate(times) if row[f"bad{i}"]}
    if not wrong:
        return df
    schema = T.StructType([
        T.StructField(f.name, T.StringType() if f.name in wrong else f.dataType, True) for f in df.schema.fields
    ])
    return spark.read.option("header", True).schema(schema).csv(list(paths))


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


# ------------------------------------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value):
            return "NULL"
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        import pandas as pd

        if value is pd.NaT or (not isinstance(value, (str, list, tuple, dict)) and pd.isna(value) is True):
            return "NULL"
        if isinstance(value, pd.Timestamp):
            value = value.to_pydatetime(warn=False)
    except (ImportError, TypeError, ValueError):
        pass
    if isinstance(value, timedelta):  # also pandas' Timedelta: "00:14:00", not "0 days 00:14:00"
        return _duration(value)
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        if value.tzinfo is not None:
            text += value.strftime("%z")
        return text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy scalars and arrays
        return _cell(value.tolist())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return str(value)


def _duration(value: timedelta) -> str:
    micros = int(value // timedelta(microseconds=1))
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, micros = divmod(micros, 1_000_000)
    days, seconds = divmod(seconds, 86_400)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if micros:
        text += f".{micros:06d}".rstrip("0")
    if days:
        text = f"{days} day{'s' if days > 1 else ''} {text}"
    return sign + text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool) or (
        hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iuf"
    )


def pd_is_float(series: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_float_dtype(series))


def _pad_decimals(rows: list[list[str]], index: int, max_decimals: int = 6) -> None:
    """Give a float column's cells the same number of decimals (40.9 next to 41.12 prints as 40.90)."""
    decimals = 0
    for row in rows:
        cell = row[index]
        if not re.fullmatch(r"-?\d+(\.\d+)?", cell):
            if cell == "NULL":
                continue
            return  # exponents, inf: leave the column as is
        decimals = max(decimals, len(cell.partition(".")[2]))
    if decimals == 0 or decimals > max_decimals:
        return
    for row in rows:
        if row[index] != "NULL":
            row[index] = f"{float(row[index]):.{decimals}f}"


def format_table(pdf: "pd.DataFrame") -> str:
    """A plain aligned text table: a header, a rule, one line per row; numbers right-aligned, NULL for missing."""
    columns = [str(c) for c in pdf.columns]
    rows = [[_cell(v) for v in record] for record in pdf.itertuples(index=False, name=None)]
    numeric = [
        all(_is_number(v) for v in pdf.iloc[:, i].dropna().tolist()) and pdf.iloc[:, i].notna().any()
        for i in range(len(columns))
    ]
    for i in range(len(columns)):
        if pd_is_float(pdf.iloc[:, i]):
            _pad_decimals(rows, i)
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        parts = [cell.rjust(w) if num else cell.ljust(w) for cell, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def _is_scalar(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict, set)):
        return False
    return not (hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0)


def _display_order(pdf: "pd.DataFrame") -> "pd.DataFrame":
    """Without an ORDER BY the engines return rows in different orders; show them sorted, the same way."""
    if len(pdf) < 2:
        return pdf
    sortable = [c for c in pdf.columns if pdf[c].dtype != object or all(_is_scalar(v) for v in pdf[c])]
    if not sortable:
        return pdf
    try:
        return pdf.sort_values(sortable, kind="mergesort", na_position="last").reset_index(drop=True)
    except (TypeError, ValueError):
        return pdf


def write_output(pdf: "pd.DataFrame", path: str) -> None:
    fmt = _format_of(path, None, what="output file")
    try:
        if fmt == "csv":
            pdf.to_csv(path, index=False)
        elif fmt == "parquet":
            # Microseconds: Spark cannot read the nanosecond timestamps pandas writes by default.
            pdf.to_parquet(path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)
        else:
            pdf.to_json(path, orient="records", lines=True, date_format="iso")
    except (OSError, ValueError, ImportError) as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None


# ------------------------------------------------------------------------------------------ commands


@dataclass
class RunResult:
    table: "pd.DataFrame"
    events: int
    partitions: int
    seconds: float
    ordered: bool = False  # the query has an outer ORDER BY: keep its order


def _partition_count(pdf: "pd.DataFrame", columns: list[str]) -> int:
    if pdf.empty:
        return 0
    if not columns:
        return 1
    return int(pdf.groupby(columns, dropna=False, sort=False).ngroups)


def _resolve_partition(plan: Any, columns: Sequence[str]) -> list[str]:
    from spark_bridge.batch import resolve_columns

    return resolve_columns(list(getattr(plan, "partition_columns", None) or []), list(columns))


def _has_outer_order(plan: Any, columns: Sequence[str]) -> bool:
    keys = getattr(plan, "sort_keys", None)
    if callable(keys):
        keys = keys(list(columns))
    return bool(keys)


def _run_python(query: Any, paths: Sequence[str], fmt: str, limit: int | None) -> RunResult:
    started = time.perf_counter()
    pdf = read_pandas(paths, fmt)
    result = query.run(pdf)
    partition = _resolve_partition(query.plan, pdf.columns)
    if limit is not None:
        result = result.head(limit)
    seconds = time.perf_counter() - started
    ordered = _has_outer_order(query.plan, pdf.columns)
    return RunResult(result, len(pdf), _partition_count(pdf, partition), seconds, ordered)


def _start_spark(master: str) -> Any:
    try:
        from spark_bridge.session import get_spark
    except ImportError as exc:  # pragma: no cover - pyspark missing
        raise UsageError(f"the spark engine needs pyspark ({exc}); pip install 'cep[spark]', or use --engine python") from None
    try:
        return get_spark(master)
    except ImportError as exc:
        raise UsageError(f"the spark engine needs pyspark ({exc}); pip install 'cep[spark]', or use --engine python") from None
    except Exception as exc:
        raise UsageError(
            f"could not start Spark ({_first_line(str(exc))}).\n"
            "Spark needs Java 17 or newer on PATH (e.g. apt-get install openjdk-17-jre-headless); "
            "or run with --engine python"
        ) from None


def _run_spark(query: Any, paths: Sequence[str], fmt: str, limit: int | None, master: str) -> RunResult:
    spark = _start_spark(master)
    from pyspark.sql import functions as F

    started = time.perf_counter()
    df = read_spark(spark, paths, fmt)
    matches = query.on_spark(df)
    partition = _resolve_partition(query.plan, df.columns)
    if limit is not None:
        matches = matches.limit(limit)
    result = matches.toPandas()
    seconds = time.perf_counter() - started

    if partition:
        counts = df.groupBy(*[F.col(_q(c)) for c in partition]).count()
        row = counts.agg(F.sum("count").alias("events"), F.count(F.lit(1)).alias("keys")).collect()[0]
        events, partitions = int(row["events"] or 0), int(row["keys"] or 0)
    else:
        events = df.count()
        partitions = 1 if events else 0
    return RunResult(result, events, partitions, seconds, _has_outer_order(query.plan, df.columns))


def _spark_error(exc: BaseException) -> str | None:
    """The cep error inside a Spark failure (raised in a worker), or a short message; None if not Spark's."""
    name = type(exc).__name__
    if name not in ("PythonException", "Py4JJavaError", "SparkRuntimeException", "AnalysisException", "PySparkException") and not type(exc).__module__.startswith(("pyspark", "py4j")):
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
    detail = _first_line(text) + (f" {raised[-1].strip()}" if raised and raised[-1].strip() not in _first_line(text) else "")
    return f"error: spark: {detail}"


def cmd_run(args: argparse.Namespace) -> int:
    import cep

    text = _read_text(args.query_file)
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    if args.output:
        _format_of(args.output, None, what="output file")
        parent = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(parent):
            raise UsageError(f"cannot write {args.output}: no directory {parent}")
    fmt = _input_format(args.input, args.format)

    try:
        query = cep.compile(text, filename=args.query_file)
        if args.engine == "python":
            run = _run_python(query, args.input, fmt, args.limit)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = _run_spark(query, args.input, fmt, args.limit, args.master)
    except cep.CepError as err:
        _err(str(err.with_source(text, args.query_file)))
        return EXIT_QUERY_ERROR
    except UsageError:
        raise
    except Exception as exc:
        message = _spark_error(exc)
        if message is None:
            raise
        _err(f"{args.query_file}: {message}")
        return EXIT_QUERY_ERROR

    table = run.table
    if not run.ordered:
        table = _display_order(table)
    if args.output:
        write_output(table, args.output)
        print(f"wrote {len(table)} rows to {args.output}")
    elif len(table):
        print(format_table(table))
    else:
        print("(no matches)")
    print(
        f"events read: {run.events}, partitions: {run.partitions}, matches: {len(table)}, "
        f"seconds: {run.seconds:.2f} (engine: {args.engine})"
    )
    return EXIT_OK


def _load_schema(text: str | None) -> dict[str, str] | None:
    """The ``--schema`` option as ``{column: type}`` (the checker's parser, so its type names agree)."""
    if not text:
        return None
    import cep
    from grammar.parser import parse_schema

    try:
        return parse_schema(text)
    except cep.CepError as err:
        raise UsageError(f"invalid --schema:\n{err}") from None


def parse_and_check(text: str, filename: str, schema: dict[str, str] | None) -> list[Any]:
    """Every statement of a file, parsed and checked (against ``schema`` when given); raises CepError."""
    import cep

    params = inspect.signature(cep.parse_all).parameters
    if schema is not None and "schema" in params:
        return cep.parse_all(text, filename=filename, schema=schema)
    statements = cep.parse_all(text, filename=filename)
    if schema is not None:
        from grammar.checks import check

        for statement in statements:
            check(statement, schema=schema, source=text, filename=filename)
    return statements


def cmd_check(args: argparse.Namespace) -> int:
    import cep

    schema = _load_schema(args.schema)
    status = EXIT_OK
    for path in args.files:
        try:
            text = _read_text(path)
        except UsageError as exc:
            _err(f"cep check: {exc}")
            status = max(status, EXIT_USAGE)
            continue
        try:
            statements = parse_and_check(text, path, schema)
        except cep.CepError as err:
            _err(str(err.with_source(text, path)))
            status = max(status, EXIT_QUERY_ERROR)
            continue
        count = len(statements)
        print(f"{path}: ok ({count} statement{'' if count == 1 else 's'})")
    return status


def format_text(text: str, filename: str | None = None) -> str:
    """The canonical text of every statement in ``text`` (comments other than ``-- name:`` are dropped)."""
    import cep

    if hasattr(cep, "format_query"):
        return cep.format_query(text)
    from grammar.format import format_statement

    parts = []
    for statement in cep.parse_all(text, filename=filename):
        body = format_statement(statement)
        name = getattr(statement, "name", None)
        parts.append(f"-- name: {name}\n{body}" if name else body)
    return parts[0] if len(parts) == 1 else ";\n\n".join(parts) + ";"


def cmd_fmt(args: argparse.Namespace) -> int:
    import cep

    text = _read_text(args.file)
    try:
        formatted = format_text(text, args.file)
    except cep.CepError as err:
        _err(str(err.with_source(text, args.file)))
        return EXIT_QUERY_ERROR
    print(formatted.rstrip("\n"))
    return EXIT_OK


EXPLAIN_FORMATS = ("text", "dot", "svg", "png")


def _emit(payload: str | bytes, output: str | None) -> None:
    """Print ``payload`` or write it to ``output``; binary output never goes to a terminal."""
    if output:
        try:
            with open(output, "wb") as fh:
                fh.write(payload.encode("utf-8") if isinstance(payload, str) else payload)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc}") from None
        print(f"wrote {output}")
    elif isinstance(payload, str):
        print(payload.rstrip("\n"))
    elif sys.stdout.isatty():
        raise UsageError("a png is binary: write it with --output FILE.png (or redirect standard output)")
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()


def cmd_explain(args: argparse.Namespace) -> int:
    import cep

    text = _read_text(args.file)
    fmt = args.format
    if fmt is None:  # from --output's extension, else the text listing
        ext = os.path.splitext(args.output or "")[1].lower().lstrip(".")
        fmt = ext if ext in EXPLAIN_FORMATS[1:] else "text"
    try:
        query = cep.compile(text, filename=args.file)
    except cep.CepError as err:
        _err(str(err.with_source(text, args.file)))
        return EXIT_QUERY_ERROR
    if fmt == "text":
        _emit(query.explain(), args.output)
        return EXIT_OK
    from matcher.dot import GraphvizMissing, render, to_dot

    payload: str | bytes = to_dot(query.statement)
    if fmt != "dot":
        try:
            payload = render(payload, fmt)
        except GraphvizMissing as exc:
            raise UsageError(str(exc)) from None
        if fmt == "svg":
            payload = payload.decode("utf-8")
    _emit(payload, args.output)
    return EXIT_OK


# ------------------------------------------------------------------------------------------- trace

TRACE_EVENTS = ("tested", "dropped", "alive", "match")


def _partition_filter(query: Any, pdf: "pd.DataFrame", specs: Sequence[str]) -> tuple["pd.DataFrame", str]:
    """The rows of the one partition that ``--partition COLUMN=VALUE`` options pick, and its description.

    Values are compared as ``cep run`` prints them, so what a run shows can be pasted back here.
    """
    columns = _resolve_partition(query.plan, pdf.columns)
    by_fold = {c.casefold(): c for c in columns}
    chosen: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--partition expects COLUMN=VALUE, e.g. --partition 'symbol=ACME'; got {spec!r}")
        column = by_fold.get(name.strip().casefold())
        if column is None:
            by = ", ".join(columns) if columns else "nothing (it has no PARTITION BY)"
            raise UsageError(f"--partition {name.strip()}: the query partitions by {by}")
        chosen[column] = value
    subset = pdf
    for column, value in chosen.items():
        cells = subset[column].map(_cell)
        if not (cells == value).any():
            known = sorted(set(pdf[column].map(_cell)))
            sample = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
            raise UsageError(f"no rows with {column}={value} (values of {column}: {sample})")
        subset = subset[cells == value]
    rest = [c for c in columns if c not in chosen]
    if rest and subset.groupby(rest, dropna=False).ngroups > 1:
        first = subset.iloc[0]
        hint = " ".join(f"--partition '{c}={_cell(first[c])}'" for c in columns)
        raise UsageError(f"the input holds {subset.groupby(rest, dropna=False).ngroups} partitions; pick one, e.g. {hint}")
    first = subset.iloc[0] if len(subset) else None
    described = ", ".join(f"{c}={_cell(first[c])}" for c in columns) if first is not None else ""
    return subset, described or "(the whole input: no PARTITION BY)"


def _bound(text: str | None, series: "pd.Series", option: str) -> Any:
    """``--from``/``--to`` in the type of the ORDER BY column."""
    import pandas as pd

    if text is None:
        return None
    try:
        if pd.api.types.is_datetime64_any_dtype(series):
            return pd.Timestamp(text)
        if pd.api.types.is_numeric_dtype(series):
            return float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a {series.dtype} value like those of the ORDER BY column") from None
    return text


def _condition_columns(query: Any, pdf: "pd.DataFrame") -> list[str]:
    """Input columns the DEFINE conditions read (what a reader of the trace wants to see per row)."""
    from grammar import ast
    from matcher.expressions import walk

    names = []
    for define in query.statement.match.defines:
        for node in walk(define.condition):
            if isinstance(node, ast.ColumnRef):
                names.append(node.column.name.casefold())
    return [c for c in pdf.columns if c.casefold() in names]


def trace_table(query: Any, pdf: "pd.DataFrame", *, show: Sequence[str] = (), events: Sequence[str] = TRACE_EVENTS,
                low: Any = None, high: Any = None) -> "pd.DataFrame":
    """``Query.trace`` of ``pdf`` (one partition) with the ORDER BY value and the ``show`` columns of each
    row, restricted to ``events`` and to order values in [low, high]."""
    from matcher.tables import pandas_to_columns

    trace = query.trace(pdf)
    columns = pandas_to_columns(pdf)
    machine = query.plan.machine(tuple(columns))
    order = query.plan.order_columns[0] if query.plan.order_columns else "order_key"
    parts = query.plan.partitions(machine, columns)
    positions = parts[0][1] if parts else []
    table = trace.drop(columns=["partition"]).rename(columns={"order_key": order})
    for name in show:
        values = pdf[name].tolist()
        table.insert(2 + list(show).index(name), name, [values[positions[r]] if 0 <= r < len(positions) else None for r in table["row"]])
    # The VM reports a match once the partial matches that could still beat it are gone, often a row
    # or more after the match's last row; listing by row puts it where a reader looks for it.
    table = table.sort_values("row", kind="stable")
    table = table[table["event"].isin(list(events))]
    if low is not None:
        table = table[table[order] >= low]
    if high is not None:
        table = table[table[order] <= high]
    return table.reset_index(drop=True)


def cmd_trace(args: argparse.Namespace) -> int:
    import cep

    text = _read_text(args.query_file)
    fmt = _input_format(args.input, args.format)
    events = [e.strip() for e in args.events.split(",") if e.strip()] if args.events else list(TRACE_EVENTS)
    unknown = sorted(set(events) - set(TRACE_EVENTS))
    if unknown:
        raise UsageError(f"--events: unknown kind {', '.join(unknown)} (kinds: {', '.join(TRACE_EVENTS)})")
    if args.output:
        _format_of(args.output, None, what="output file")
    try:
        query = cep.compile(text, filename=args.query_file)
        pdf = read_pandas(args.input, fmt)
        part, described = _partition_filter(query, pdf, args.partition or [])
        order = query.plan.order_columns[0].casefold() if query.plan.order_columns else None
        order_column = next((c for c in part.columns if c.casefold() == order), None)
        if order_column is None and (args.start or args.end):
            raise UsageError("--from and --to need a query with an ORDER BY column")
        order_series = part[order_column] if order_column is not None else None
        low, high = _bound(args.start, order_series, "--from"), _bound(args.end, order_series, "--to")
        if args.columns is None:
            show = _condition_columns(query, part)
        else:
            wanted = [c.strip() for c in args.columns.split(",") if c.strip()]
            missing = [c for c in wanted if c not in part.columns]
            if missing:
                raise UsageError(f"--columns: no column {', '.join(missing)} in the input (columns: {', '.join(map(str, part.columns))})")
            show = wanted
        show = [c for c in show if c != order_column]
        table = trace_table(query, part, show=show, events=events, low=low, high=high)
    except cep.CepError as err:
        _err(str(err.with_source(text, args.query_file)))
        return EXIT_QUERY_ERROR
    matches = int((table["event"] == "match").sum())
    dropped = int((table["event"] == "dropped").sum())
    print(f"partition: {described}")
    if args.output:
        write_output(table, args.output)
        print(f"wrote {len(table)} trace records to {args.output}")
    elif len(table):
        print(format_table(table))
    else:
        print("(no trace records in this range)")
    print(f"rows: {len(part)}, trace records: {len(table)}, matches: {matches}, dropped: {dropped}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------ report


def cmd_report(args: argparse.Namespace) -> int:
    import cep

    text = _read_text(args.query_file)
    fmt = _input_format(args.input, args.format)
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {args.out}: no directory {parent}")
    try:
        from cep import report
    except ImportError as exc:  # pragma: no cover - matplotlib missing
        raise UsageError(f"cep report needs matplotlib ({exc}): pip install 'cep[report]'") from None
    try:
        query = cep.compile(text, filename=args.query_file)
        pdf = read_pandas(args.input, fmt)
        html = report.build_report(query, pdf, column=args.column, max_partitions=args.partitions,
                                   sources=list(args.input))
    except cep.CepError as err:
        _err(str(err.with_source(text, args.query_file)))
        return EXIT_QUERY_ERROR
    except report.ReportError as exc:
        raise UsageError(str(exc)) from None
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(html.text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc}") from None
    print(f"wrote {args.out} ({html.summary})")
    return EXIT_OK


# --------------------------------------------------------------------------------------------- parser


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cep",
        description="Complex event processing: SQL:2016 MATCH_RECOGNIZE queries over event data, on Spark or in plain Python.",
        epilog="Exit codes: 0 ok, 1 query error, 2 usage or file error (or a missing helper program), 130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="run a query over input files and print the matches",
        description="Run the MATCH_RECOGNIZE query in QUERY_FILE over the input rows; print the matches as a "
        "table and a summary line.",
    )
    run.add_argument("query_file", metavar="QUERY_FILE", help="file holding the query")
    run.add_argument(
        "--input", "-i", action="append", required=True, metavar="PATH",
        help="input file (or Spark directory); repeat for several files of the same format",
    )
    run.add_argument("--format", choices=FORMATS, help="input format (default: from the file extension)")
    run.add_argument(
        "--engine", choices=("spark", "python"), default="spark",
        help="spark: local Spark batch job (default); python: the pure-Python matcher over pandas",
    )
    run.add_argument("--output", "-o", metavar="FILE", help="write the matches to FILE (.csv, .parquet or .json) instead of printing them")
    run.add_argument("--limit", type=_non_negative_int, metavar="N", help="keep at most N matches")
    run.add_argument("--master", default="local[*]", help="Spark master URL (default: %(default)s)")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser(
        "check",
        help="parse and check query files without running them",
        description="Parse and check every statement of each FILE; print each error with its position.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="query file(s)")
    check.add_argument(
        "--schema", metavar="COLUMNS",
        help="input columns and types to check against, e.g. 'ts TIMESTAMP, symbol STRING, price DOUBLE'",
    )
    check.set_defaults(func=cmd_check)

    fmt = sub.add_parser("fmt", help="print a query in canonical form", description="Print the canonical formatting of the queries in FILE.")
    fmt.add_argument("file", metavar="FILE", help="query file")
    fmt.set_defaults(func=cmd_fmt)

    explain = sub.add_parser(
        "explain", help="print the compiled program of a query, or draw its automaton",
        description="Compile the query in FILE and print the program the matcher runs, its conditions and "
        "execution path (text), or the pattern's automaton as Graphviz DOT, SVG or PNG (svg and png need "
        "Graphviz's 'dot' program).",
    )
    explain.add_argument("file", metavar="FILE", help="query file")
    explain.add_argument("--format", "-f", choices=EXPLAIN_FORMATS,
                         help="text (default), dot, svg or png (default: from --output's extension, else text)")
    explain.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    explain.set_defaults(func=cmd_explain)

    trace = sub.add_parser(
        "trace", help="show, row by row, why a partition did or did not match",
        description="Run the query over one partition of the input with a tracer: for each row, the "
        "conditions tested and their result, the partial matches alive (by pattern position), those "
        "dropped and why, and where matches began and ended.",
    )
    trace.add_argument("query_file", metavar="QUERY_FILE", help="file holding the query")
    trace.add_argument("--input", "-i", action="append", required=True, metavar="PATH", help="input file; repeat for several")
    trace.add_argument("--format", choices=FORMATS, help="input format (default: from the file extension)")
    trace.add_argument("--partition", "-p", action="append", metavar="COLUMN=VALUE",
                       help="the partition to trace, e.g. 'symbol=ACME'; repeat for each PARTITION BY column")
    trace.add_argument("--from", dest="start", metavar="X", help="show records from this ORDER BY value on (e.g. '2024-01-02 09:40')")
    trace.add_argument("--to", dest="end", metavar="X", help="show records up to this ORDER BY value")
    trace.add_argument("--events", metavar="KINDS", help=f"comma-separated record kinds to show (default: all of {','.join(TRACE_EVENTS)})")
    trace.add_argument("--columns", metavar="NAMES", help="input columns to show per row (default: those the DEFINE conditions read)")
    trace.add_argument("--output", "-o", metavar="FILE", help="write the trace to FILE (.csv, .parquet or .json)")
    trace.set_defaults(func=cmd_trace)

    report = sub.add_parser(
        "report", help="write a self-contained HTML report of a query's matches",
        description="Run the query over the input (pure-Python engine) and write one HTML file with the "
        "query, summary counts, matches per partition and over time, match length and duration "
        "histograms, and charts of a column with the matched rows shaded and labelled by CLASSIFIER. "
        "The charts are embedded PNGs: the file needs no network to view. Needs matplotlib.",
    )
    report.add_argument("query_file", metavar="QUERY_FILE", help="file holding the query")
    report.add_argument("--input", "-i", action="append", required=True, metavar="PATH", help="input file; repeat for several")
    report.add_argument("--format", choices=FORMATS, help="input format (default: from the file extension)")
    report.add_argument("--out", "--output", "-o", dest="out", required=True, metavar="FILE", help="the HTML file to write")
    report.add_argument("--column", "-c", metavar="NAME",
                        help="column to chart per partition (default: the first numeric column the conditions "
                        "read, else any numeric column, else a text column they read, drawn as lanes of events)")
    report.add_argument("--partitions", "-n", type=_non_negative_int, default=4, metavar="N",
                        help="chart at most N partitions, those with the most matches (default: %(default)s)")
    report.set_defaults(func=cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, message already printed)
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.func(args)
    except UsageError as exc:
        _err(f"cep {args.command}: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `cep run ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

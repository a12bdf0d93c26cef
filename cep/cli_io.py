"""What the ``cep`` commands share: reading event files (pandas and Spark readers), printing match tables
and errors, exit codes, and starting Spark."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Sequence

from cep.grammar.errors import CepError
from cep.spark_bridge.sinks.safe_text import visible
from cep.spark_bridge.spark.columns import quote
from cep.spark_bridge.spark.session import get_spark

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Imported inside functions: pandas (heavy; `cep check` never needs it) and pyspark (optional: the "spark" extra).

# A value that looks like an ISO-8601 date or timestamp (what a CSV or JSON column of times holds).
_ISO_DATETIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?$"
)

FORMATS = ("csv", "parquet", "json")

EXIT_OK = 0
EXIT_QUERY_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_EXTENSIONS = {
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


def print_error(message: str) -> None:
    print(message, file=sys.stderr)


def read_text(path: str, what: str = "query file") -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{what} is a directory: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def format_of(path: str, explicit: str | None, *, what: str) -> str:
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


def input_format(paths: Sequence[str], explicit: str | None) -> str:
    for path in paths:
        if not os.path.exists(path):
            raise UsageError(f"input file not found: {path}")
    formats = {format_of(path, explicit, what="input") for path in paths}
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
                        F.when(F.col(quote(c)).isNotNull() & F.try_to_timestamp(F.col(quote(c))).isNull(), 1).otherwise(0)
                    ).alias(f"bad{i}")
                    for i, c in enumerate(strings)
                ] + [F.count(F.col(quote(c))).alias(f"n{i}") for i, c in enumerate(strings)]
                row = df.agg(*checks).collect()[0]
                for i, c in enumerate(strings):
                    if row[f"n{i}"] and not row[f"bad{i}"]:
                        df = df.withColumn(c, F.try_to_timestamp(F.col(quote(c))))
    except Exception as exc:
        if type(exc).__name__ in ("AnalysisException", "SparkRuntimeException", "IllegalArgumentException", "PythonException", "Py4JJavaError"):
            message = f"cannot read input as {fmt}: {first_line(str(exc))}"
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
        F.sum(F.when(F.col(quote(c)).isNotNull() & ~F.trim(F.col(quote(c))).rlike(_ISO_DATETIME.pattern), 1).otherwise(0)).alias(f"bad{i}")
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


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


# ------------------------------------------------------------------------------------------- output


def cell(value: Any) -> str:
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
        return cell(value.tolist())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cell(v) for v in value) + "]"
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
    """A plain aligned text table: a header, a rule, one line per row; numbers right-aligned, NULL for missing.
    Control characters in a value (an ANSI escape, a newline) are shown as escapes (``\x1b``, ``\n``): data
    can neither repaint the terminal nor break the table."""
    columns = [visible(str(c)) for c in pdf.columns]
    rows = [[visible(cell(v)) for v in record] for record in pdf.itertuples(index=False, name=None)]
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


def display_order(pdf: "pd.DataFrame") -> "pd.DataFrame":
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


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formulas(pdf: "pd.DataFrame") -> "pd.DataFrame":
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


def write_output(pdf: "pd.DataFrame", path: str, *, keep_formulas: bool = False) -> None:
    """Write ``pdf`` as CSV, Parquet or JSON lines (by the extension). In CSV, text that a spreadsheet
    would run as a formula is written with a leading ``'`` unless ``keep_formulas``."""
    fmt = format_of(path, None, what="output file")
    try:
        if fmt == "csv":
            (pdf if keep_formulas else neutralise_formulas(pdf)).to_csv(path, index=False)
        elif fmt == "parquet":
            # Microseconds: Spark cannot read the nanosecond timestamps pandas writes by default.
            pdf.to_parquet(path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)
        else:
            pdf.to_json(path, orient="records", lines=True, date_format="iso")
    except (OSError, ValueError, ImportError) as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None


def write_dead_letter(records: Sequence[dict], path: str) -> None:
    """The dead-letter records of ``Query.run(dead_letter=...)`` as JSON lines (values as text where JSON has no type)."""
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

def start_spark(master: str, *, python_env: str | None = None) -> Any:
    try:
        return get_spark(master, python_env=python_env)
    except CepError as err:  # the executors cannot run cep (shipping.ShippingError): its message says what to do
        raise UsageError(str(err)) from None
    except ImportError as exc:
        raise UsageError(f"the spark engine needs pyspark ({exc}); pip install 'cep-spark[spark]', or use --engine python") from None
    except Exception as exc:
        raise UsageError(
            f"could not start Spark ({first_line(str(exc))}).\n"
            "Spark needs Java 17 or newer on PATH (e.g. apt-get install openjdk-17-jre-headless); "
            "or run with --engine python"
        ) from None


def spark_error(exc: BaseException) -> str | None:
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
    detail = first_line(text) + (f" {raised[-1].strip()}" if raised and raised[-1].strip() not in first_line(text) else "")
    return f"error: spark: {detail}"

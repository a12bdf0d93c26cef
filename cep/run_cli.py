"""``cep run``: a whole SQL statement with MATCH_RECOGNIZE clauses over files, on the engine that suits them.

    cep run QUERY_FILE [--input [NAME=]PATH ...] [--engine spark|python] [--output FILE] [--limit N] ...

Which engine (docs/cli.md, "Which engine"): ``--engine`` if given; else Spark for what only Spark reads
(directories, remote paths) or when ``--master`` is given, and for
inputs larger than ``PYTHON_MAX_BYTES``; else the python engine, which starts in a fraction of a second
where Spark takes 10 to 20.

Inputs: ``--input PATH`` (repeatable: files of one format, read as one table) is the table the statement's
first ``MATCH_RECOGNIZE`` reads, whatever the statement calls it (or the file of its ``FROM 'file'``);
``--input NAME=PATH`` is the table ``NAME`` (a reference table to join, a second event table).
``FROM 'data/ticks.parquet'`` anywhere a table may stand reads that file. The rows come in the order the
query defines when it has no ORDER BY (partitions in key order, matches in order); when the statement
groups or joins without ORDER BY, no order is defined and both engines print the rows sorted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cep
from cep.cli_io import (
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_USAGE,
    INPUT_HELP,
    SCHEMA_HELP,
    Inputs,
    KafkaInput,
    UsageError,
    add_input_format_option,
    arrow_to_pandas,
    bad_rows_summary,
    format_of,
    input_format,
    kafka_input,
    non_negative_int,
    pandas_schema,
    print_error,
    read_kafka_static,
    read_pandas,
    read_spark,
    read_text,
    set_aside_bad_rows,
    spark_error,
    start_spark,
    write_dead_letter,
    write_output,
)
from cep.delta_io import app_id_of, columns_read, default_table, input_identity, is_delta, pushed_filters, snapshot_of
from cep.duckdb_results import time_python_cannot_hold
from cep.grammar.errors import CepSemanticError
from cep.grammar.parser import parse_unchecked
from cep.matcher.rows.text_types import resolve_declared
from cep.query import ALERT_REPLAY_NAMES, compile_rule, load_rules, rule_alerts
from cep.spark_bridge.alerting.rule_set import event_time_of, match_id_text
from cep.spark_bridge.alerting.rules import SAFE_ID_PART, load_file
from cep.spark_bridge.alerting.suppress import parse_specs
from cep.spark_bridge.engine.durations import session_timeout_us
from cep.spark_bridge.sinks.safe_text import visible
from cep.spark_bridge.spark.columns import CORRUPT_RECORD
from cep.spark_bridge.spark.kafka import CepKafkaError, is_kafka_url
from cep.spark_bridge.spark.types import spark_to_sql
from cep.statement import SqlStatement
from cep.statement_engines import ClauseStats, spark_cep_error
from cep.table_text import display_order, format_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Imported inside functions: rich (only the progress bar of a large input), pandas (heavy: `cep run --rules`) and
# pyspark (optional).

DEFAULT_MASTER = "local[*]"
# Below this many rows a run is over before a progress bar would be worth drawing.
PROGRESS_MIN_ROWS = 100_000
# Inputs up to this size (bytes on disk, all files together) run on the python engine by default.
# Measured (bench/engine_choice.py, docs/cli.md "Which engine"): on one machine the python engine beats a
# local Spark at every size tried (1M rows: 44 s against 354 s on a loaded 2-core machine); its memory,
# about 10 times a CSV's size in one process, is what limits it: 512 MiB of input is about 5 GiB.
PYTHON_MAX_BYTES = 512 * 1024 * 1024
_REMOTE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


@dataclass
class RunResult:
    table: pd.DataFrame
    stats: list[ClauseStats]
    seconds: float
    engine: str
    bad_rows: dict[str, int] | None = None  # with --dead-letter: rows set aside, per reason


def choose_engine(args: argparse.Namespace, inputs: Inputs, statement: SqlStatement) -> tuple[str, str]:
    """(engine, why) for a run without --engine."""
    if args.engine:
        return args.engine, "asked"
    if args.master != DEFAULT_MASTER:
        return "spark", "--master"
    paths = list(inputs.unnamed) + list(inputs.named.values())
    if not inputs.unnamed:
        paths += [path for _start, _end, path in statement.whole.paths]
    if not paths:
        return "python", "no input file: the statement holds its rows (WITH t AS (VALUES ...))"
    for path in paths:
        if _REMOTE.match(path):
            return "spark", f"{path} is remote"
        if is_delta(path):
            continue  # a Delta table: a folder that either engine reads (its size is counted below)
        if os.path.isdir(path):
            return "spark", f"{path} is a directory"
    size = sum(os.path.getsize(path) for path in paths if os.path.isfile(path))
    size += sum(_folder_bytes(snapshot_of(path).path) for path in paths if is_delta(path))
    if size > PYTHON_MAX_BYTES:
        return "spark", f"the inputs hold {size / 2**20:.0f} MiB, more than {PYTHON_MAX_BYTES / 2**20:.0f} MiB"
    return "python", "local files"


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _dirs, names in os.walk(folder) for name in names)


def with_time_travel(inputs: Inputs, args: argparse.Namespace) -> Inputs:
    """``--delta-version``/``--delta-timestamp`` written into every Delta input that names no version itself."""
    version, timestamp = getattr(args, "delta_version", None), getattr(args, "delta_timestamp", None)
    if version is None and timestamp is None:
        return inputs
    if version is not None and timestamp is not None:
        raise UsageError("give --delta-version or --delta-timestamp, not both")
    specs = [*inputs.unnamed, *inputs.named.values()]
    if not any(is_delta(spec) for spec in specs):
        raise UsageError("--delta-version and --delta-timestamp are for a Delta input (--input delta:PATH)")

    def at(spec: str) -> str:
        if not is_delta(spec) or snapshot_of(spec).version is not None or snapshot_of(spec).timestamp is not None:
            return spec  # not Delta, or it names its own version (delta:PATH@v3)
        return f"{spec}@v{version}" if version is not None else f"{spec}@{timestamp}"

    return dataclasses.replace(
        inputs, unnamed=tuple(at(s) for s in inputs.unnamed), named={name: at(s) for name, s in inputs.named.items()}
    )


def defined_order(text: str, statement: SqlStatement) -> str:
    """'sorted' (an outer ORDER BY), 'matches' (one clause and a SELECT around it: the clause's order), or
    'none' (joins, GROUP BY, DISTINCT, unions... without ORDER BY: no order)."""
    try:
        simple = parse_unchecked(text)
    except cep.CepError:
        simple = None
    if simple is not None:
        return "sorted" if simple.order_by else "matches"
    whole = statement.whole
    depth, regions = 0, [(c.start, c.end) for c in whole.clauses]
    words = re.finditer(r"\(|\)|\bORDER\s+BY\b|'(?:[^']|'')*'|--[^\n]*|/\*[\s\S]*?\*/", text[: whole.end], re.I)
    for word in words:
        token = word.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif token.upper().startswith("ORDER") and depth == 0 and not any(a <= word.start() < b for a, b in regions):
            return "sorted"
    return "none"


def _progress_bar(total_hint: int):
    """A rich progress bar on stderr and the ``progress(done, total)`` callback that feeds it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("matching"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), TimeRemainingColumn())
    bar = Progress(*columns, console=Console(stderr=True), transient=True)
    task = bar.add_task("matching", total=total_hint)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def _as_first_table(statement: SqlStatement, tables: dict, default: Any) -> Any:
    """The unnamed input is the table the first MATCH_RECOGNIZE reads, when that is a plain name outside any
    WITH: it goes into ``tables`` under that name (and None is returned), so that a table of the same name in
    Spark's catalog cannot take its place. Otherwise it stays the default for the first table nobody gives."""
    clause = statement.clauses[0] if statement.clauses else None
    if default is None or clause is None or clause.scopes or clause.path is not None:
        return default
    name = statement.text[clause.relation[0] : clause.relation[1]].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name) or name in tables:
        return default
    tables[name] = default
    return None


def _run_python(
    statement: SqlStatement,
    inputs: Inputs,
    fmt: str | None,
    args: argparse.Namespace,
    replay: dict,
    *,
    default: Any = None,
    dead_letter: str | None = None,
    declared: dict[str, str] | None = None,
) -> RunResult:
    """The python engine; ``default``: the unnamed input already read (a Kafka replay's good rows);
    ``declared``: its CSV column types from --schema (the row checks set aside values of other types)."""
    started = time.perf_counter()
    columns = columns_read(statement)
    if default is None and inputs.unnamed:
        pushed = pushed_filters(statement, default_table(statement, inputs.named))
        default = read_pandas(list(inputs.unnamed), fmt, declared, columns=columns, filters=pushed)
    if declared:
        declared = resolve_declared(declared, list(default.columns))
    if default is not None:  # the clauses that read the input directly, checked against its own types
        check_input_types(statement, {**pandas_schema(default), **(declared or {})}, fmt, declared)
    tables = {name: inputs.read_named_pandas(name, columns, pushed_filters(statement, name)) for name in inputs.named}
    default = _as_first_table(statement, tables, default)
    options = dict(replay)
    records: list[dict] = []
    checks: dict = {}
    if dead_letter:
        options.update(dead_letter=records, stats=checks)
    elif fmt == "json":  # a value of another kind in a column the query reads stops the run, as on Spark
        options["refuse_odd_kinds"] = True
    if declared:
        options["schema"] = declared
    progress = args.progress
    if progress is None:  # automatic: on a terminal, for large inputs
        progress = sys.stderr.isatty() and default is not None and len(default) >= PROGRESS_MIN_ROWS
    stats: list[ClauseStats] = []

    def read_path(path: str):
        return read_pandas([path], input_format([path], args.input_format), columns=columns)

    if progress:
        bar, options["progress"] = _progress_bar(len(default) if default is not None else 0)
        with bar:
            result = statement.run(
                tables, default=default, read_path=read_path, clause_stats=stats, kind="arrow", **options
            )
    else:
        result = statement.run(
            tables, default=default, read_path=read_path, clause_stats=stats, kind="arrow", **options
        )
    if dead_letter:
        write_dead_letter(records, dead_letter)
    table = arrow_to_pandas(result)
    if args.limit is not None:
        table = table.head(args.limit)
    return RunResult(
        table, stats, time.perf_counter() - started, "python", checks.get("by_reason", {}) if dead_letter else None
    )


def _run_spark(
    statement: SqlStatement,
    inputs: Inputs,
    fmt: str | None,
    args: argparse.Namespace,
    replay: dict,
    *,
    spark: Any = None,
    default: Any = None,
    dead_letter: str | None = None,
    declared: dict[str, str] | None = None,
) -> RunResult:
    """A Spark job; ``spark`` and ``default``: a session and the unnamed input already read (Kafka);
    ``declared`` as for the python engine (the reader marks values of other types as unread)."""
    specs = [*inputs.unnamed, *inputs.named.values(), *(path for _s, _e, path in statement.whole.paths)]
    spark = spark or start_spark(args.master, delta=any(is_delta(s) for s in specs) or args.input_format == "delta")
    started = time.perf_counter()
    columns = columns_read(statement)
    if default is None and inputs.unnamed:
        pushed = pushed_filters(statement, default_table(statement, inputs.named))
        default = read_spark(spark, list(inputs.unnamed), fmt, declared, columns=columns, filters=pushed)
    if default is not None:
        check_input_types(statement, {f.name: spark_to_sql(f.dataType) for f in default.schema.fields}, fmt, declared)
    tables = {
        name: inputs.read_named_spark(spark, name, columns, pushed_filters(statement, name)) for name in inputs.named
    }
    default = _as_first_table(statement, tables, default)
    stats: list[ClauseStats] = []

    def read_path(path: str):
        return read_spark(spark, [path], input_format([path], args.input_format), columns=columns)

    options = dict(replay)
    records: list = []  # the dead-letter DataFrames of the clauses
    checks: dict = {}
    if dead_letter:
        options.update(dead_letter=records, stats=checks)
    frame = statement.on_spark(
        spark, tables=tables, default=default, read_path=read_path, ordered=True, clause_stats=stats, **options
    )
    if args.limit is not None:
        frame = frame.limit(args.limit)
    answer = frame.toArrow()
    refuse_years_python_cannot_hold(answer)
    table = arrow_to_pandas(answer)
    if dead_letter:
        write_dead_letter([row.asDict() for found in records for row in found.collect()], dead_letter)
    return RunResult(
        table, stats, time.perf_counter() - started, "spark", checks.get("by_reason", {}) if dead_letter else None
    )


def _run_kafka(
    statement: SqlStatement, source: KafkaInput, engine: str, inputs: Inputs, args: argparse.Namespace, replay: dict
) -> RunResult:
    """A replay of what the topics hold now (``cli_io.read_kafka_static``): bad messages set aside and counted
    as ``cep stream`` counts them, the rest matched by either engine (python: through Arrow and pandas)."""
    from pyspark.sql import functions as F

    spark = start_spark(args.master, kafka=True)
    started = time.perf_counter()
    events = read_kafka_static(spark, source)
    readable = [c for c in events.columns if c != CORRUPT_RECORD]
    order = list(statement.query(statement.clauses[0]).plan.order_names(readable))
    good, bad = set_aside_bad_rows(events, order[0] if order else None)
    counts = bad.groupBy("_cep_error").agg(F.count(F.lit(1)).alias("n")).collect()
    bad_rows = {row["_cep_error"]: row["n"] for row in counts}
    if args.dead_letter:
        write_dead_letter([row.asDict() for row in bad.collect()], args.dead_letter)
    if engine == "python":
        run = _run_python(statement, inputs, None, args, replay, default=arrow_to_pandas(good.toArrow()))
    else:
        run = _run_spark(statement, inputs, None, args, replay, spark=spark, default=good)
    if run.stats:  # the messages read: the bad ones too, as a file's bad rows are counted
        run.stats[0] = dataclasses.replace(run.stats[0], events=run.stats[0].events + sum(bad_rows.values()))
    return dataclasses.replace(run, seconds=time.perf_counter() - started, bad_rows=bad_rows)


def check_input_types(statement: SqlStatement, schema: dict, fmt: str | None, declared: dict | None) -> None:
    """``statement.check_types(schema)``; a type error over a CSV column read as text says why it is text
    and how to read it as another type (--schema), rather than only to CAST."""
    try:
        statement.check_types(schema)
    except cep.CepError as err:
        if fmt == "csv":
            _hint_text_columns(
                err, [n for n, t in schema.items() if t == "VARCHAR" and n not in (declared or {})], statement.text
            )
        raise


def _hint_text_columns(err: cep.CepError, text_columns: list[str], text: str) -> None:
    hinted = []
    for diagnostic in err.errors:
        where = text[diagnostic.span.start : diagnostic.span.end]
        named = [n for n in text_columns if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", where, re.IGNORECASE)]
        if not named or diagnostic.span.end <= diagnostic.span.start:
            hinted.append(diagnostic)
            continue
        kind = "DOUBLE" if "number" in diagnostic.message else "TIMESTAMP" if "time" in diagnostic.message else "TYPE"
        hint = (
            f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} text in the CSV input: some value in "
            f'{"it" if len(named) == 1 else "them"} is not a number, time or boolean (docs/cli.md, "How files are '
            f'read"); to read {"it" if len(named) == 1 else "them"} as one and set the other rows aside: '
            f"--schema '{', '.join(f'{n} {kind}' for n in named)}' --dead-letter FILE"
        )
        hinted.append(dataclasses.replace(diagnostic, hint=hint))
    err.errors = hinted
    if len(hinted) == 1:
        err.hint = hinted[0].hint


def _replay_options(args: argparse.Namespace) -> dict:
    """``--session-timeout`` / ``--match-ids`` as the keyword arguments of ``Query.run`` and ``on_spark``;
    a session timeout that cannot be read is a usage error."""
    options: dict = {}
    if args.session_timeout is not None:
        try:
            session_timeout_us(args.session_timeout)
        except cep.CepError as err:
            raise UsageError(f"--session-timeout: {err.message}") from None
        options["session_timeout"] = args.session_timeout
    if args.match_ids:
        options["match_ids"] = True
    return options


def summary_line(run: RunResult, rows: int) -> str:
    events = sum(s.events for s in run.stats)
    partitions = sum(s.partitions for s in run.stats)
    matches = sum(s.matches for s in run.stats)
    return (
        f"events read: {events}, partitions: {partitions}, matches: {matches}, output rows: {rows}, "
        f"seconds: {run.seconds:.2f} (engine: {run.engine})"
    )


def empty_result_line(run: RunResult) -> str:
    """What an empty result says: an input with columns but no rows (a header-only CSV, a zero-row
    Parquet file) is an empty table, not a failing query, and the line says which it was."""
    if not sum(s.events for s in run.stats):
        return "(no matches: the input has no rows)"
    return "(no matches)" if not sum(s.matches for s in run.stats) else "(no rows)"


def cmd_run(args: argparse.Namespace) -> int:
    if bool(args.query_file) == bool(args.rules):
        raise UsageError("give either a QUERY_FILE or --rules DIR (not both)")
    if args.rules:
        return run_rules(args)
    if args.suppress:
        raise UsageError("--suppress goes with --rules (a query on its own is not throttled)")
    text = read_text(args.query_file)
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    if args.output:
        format_of(args.output, None, what="output file")
        written_to = snapshot_of(args.output).path if is_delta(args.output) else args.output
        parent = os.path.dirname(os.path.abspath(written_to))
        if not os.path.isdir(parent):
            raise UsageError(f"cannot write {args.output}: no directory {parent}")
    inputs = with_time_travel(Inputs.parse(args.input, fmt=args.input_format), args)
    if len(args.schema or ()) > 1 and inputs.unnamed and is_kafka_url(inputs.unnamed[0]):
        raise UsageError("a Kafka input takes one --schema: the columns of its message value")
    kafka = kafka_input(
        list(inputs.unnamed), args.input_format, (args.schema or [None])[0], args.kafka_option, args.kafka_encoding
    )
    if not kafka:  # --schema types CSV files (the unnamed input's, or NAME='...' a named input's)
        inputs = with_time_travel(Inputs.parse(args.input, args.schema, args.input_format), args)
    fmt = inputs.unnamed_format() if inputs.unnamed and not kafka else None
    declared = inputs.schemas.get(None)
    for path in inputs.named.values():
        input_format([path], args.input_format)
    replay = _replay_options(args)
    try:
        statement = cep.compile_sql(text, filename=args.query_file)
        if args.rule_id is not None:
            statement.match_id_text = _rule_match_id_text(args.rule_id, args.query_file, text)
            replay["match_ids"] = True
        engine, _why = choose_engine(args, inputs, statement)
        if kafka:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = _run_kafka(statement, kafka, engine, inputs, args, replay)
        elif engine == "python":
            run = _run_python(statement, inputs, fmt, args, replay, dead_letter=args.dead_letter, declared=declared)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = _run_spark(statement, inputs, fmt, args, replay, dead_letter=args.dead_letter, declared=declared)
    except CepKafkaError as err:  # a missing topic or unreachable brokers: where to look, not the query
        print_error(str(err))
        return EXIT_USAGE
    except cep.CepError as err:
        if err.code == "E0282" and fmt == "csv" and not err.hint:  # a CSV column of dates is DATE
            named = re.search(r"column '([^']+)'", err.message)
            column = named.group(1) if named else "COLUMN"
            err.hint = f"read it as a time: --schema '{column} TIMESTAMP' (a date is its midnight)"
            err.errors = [dataclasses.replace(found, hint=err.hint) for found in err.errors]
        if err.code == "E0291" and inputs.named:  # a named input the query does not read, by a name it does not use
            table = err.message.removeprefix("there is no table ")
            err.hint = f"the named inputs are {', '.join(inputs.named)}; give this one as --input {table}=PATH"
            err.errors = [dataclasses.replace(found, hint=err.hint) for found in err.errors]
        print_error(str(err.with_source(text, args.query_file)))
        # A table with no rows given is a usage error (exit 2), as a missing --input file is.
        return EXIT_USAGE if err.message.startswith("there is no table") else EXIT_QUERY_ERROR
    except UsageError:
        raise
    except Exception as exc:
        error = spark_cep_error(exc)  # a CepError a Spark task raised: the python engine's error, in place
        if error is None:
            return _spark_failure(exc, args.query_file)
        print_error(str(error.with_source(text, args.query_file)))
        return EXIT_QUERY_ERROR

    table = run.table
    if defined_order(text, statement) == "none":
        table = display_order(table)
    if args.output:
        identity = [
            *map(input_identity, inputs.unnamed),
            *(f"{name}={input_identity(path)}" for name, path in inputs.named.items()),
        ]
        written = write_output(
            table, args.output, keep_formulas=args.csv_keep_formulas, app_id=app_id_of(text, identity)
        )
        print(
            f"wrote {len(table)} rows to {args.output}"
            if written
            else f"{args.output} already holds the rows of this statement over these inputs: nothing appended"
        )
    elif len(table):
        print(format_table(table))
    else:
        print(empty_result_line(run))
    summary = summary_line(run, len(table))
    print(summary if args.rule_id is None else f"{summary[:-1]}; ids as cep stream gives rule {args.rule_id})")
    if run.bad_rows is not None and (args.dead_letter or sum(run.bad_rows.values())):
        print(bad_rows_summary(run.bad_rows, args.dead_letter or "set aside (--dead-letter FILE keeps them)"))
    return EXIT_OK


def _rule_match_id_text(rule_id: str, path: str, text: str) -> str:
    """What ``cep stream`` hashes into the match ids of rule ``rule_id`` if it runs the statement of ``path``
    (its id and canonical text, read by the stream's own rule loader): ``--rule-id``. Raises UsageError for
    an id the stream cannot give, or a file that is not one rule; CepError for a rule that does not load."""
    parts = rule_id.split("/")
    if len(parts) > 2 or not all(SAFE_ID_PART.match(part) for part in parts):
        raise UsageError(
            f"--rule-id {visible(rule_id)!r} is not an id cep stream gives: FILE_STEM or FILE_STEM/NAME, of ASCII "
            "letters, digits, '_', '-' and '.' (cep check --rules DIR lists the ids)"
        )
    rules, errors = load_file(path, text=text)
    if errors:
        first = errors[0]
        raise CepSemanticError(
            f"--rule-id: cep stream would not load this statement as a rule: {first.message}",
            code=first.code,
            hint="a rule is one SELECT ... FROM events MATCH_RECOGNIZE (...) statement",
        )
    if len(rules) != 1:
        raise UsageError(f"--rule-id takes a file of one rule; {path} holds {len(rules)} statements")
    return match_id_text(rule_id, rules[0].canonical)


def refuse_years_python_cannot_hold(answer) -> None:
    """A CepError where a DATE or TIMESTAMP column of Spark's answer (an Arrow table) holds a time before year
    1 or after 9999 (``date_add(d, 2147483647)``): Spark holds them, but cep prints and writes its results as
    Python's dates (``time_python_cannot_hold``, the python engine's check too)."""
    found = time_python_cannot_hold(answer)
    if found is not None:
        column, kind = found
        raise CepSemanticError(
            f"column {column} holds a {kind} outside the years 1 to 9999, which Spark holds but cep cannot "
            f"print or write (its results are Python's dates): write it as text, CAST({column} AS STRING), "
            "as Spark writes it, or keep the dates within those years",
            code="E0250",
        )


def _spark_rows(frame, query):
    """``frame.toPandas()``; a CepError a task raised is raised again as ``query.run`` raises it."""
    try:
        return frame.toPandas()
    except Exception as exc:
        error = spark_cep_error(exc)
        if error is None:
            raise
        raise error.with_source(query.text, query.filename) from None


def _spark_failure(exc: Exception, where: str) -> int:
    """A failure inside Spark (a Java exception, a dead worker) as one line on stderr and exit code 1;
    any other exception is a bug of ours and goes on with its traceback."""
    message = spark_error(exc)
    if message is None:
        raise exc
    print_error(f"{where}: {message}")
    return EXIT_QUERY_ERROR


def run_rules(args: argparse.Namespace) -> int:
    """``cep run --rules DIR``: every rule of the set over the inputs, as the live stream alerts them (the
    python engine unless --engine spark or a --master is given: rule sets are replayed rule by rule). A
    ``kafka://`` input is the messages the topics hold now, their bad ones set aside as the stream sets
    them aside (``--dead-letter``). A rule that fails is reported and the others still run."""
    import pandas as pd

    if not os.path.exists(args.rules):
        raise UsageError(f"rules directory not found: {args.rules}")
    if not args.input:
        raise UsageError("--rules needs the events: --input PATH")
    if len(args.schema or ()) > 1:
        raise UsageError("--rules reads one input: give its columns in one --schema")
    schema = (args.schema or [None])[0]
    kafka = kafka_input(list(args.input), args.input_format, schema, args.kafka_option, args.kafka_encoding)
    if (args.dead_letter and not kafka) or args.limit is not None:
        raise UsageError(
            "--limit goes with one query, and --dead-letter with one query or a kafka:// input, "
            "not with --rules over files"
        )
    try:
        specs = parse_specs(args.suppress)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    engine = args.engine or ("spark" if args.master != DEFAULT_MASTER else "python")
    options = _replay_options(args)
    options["match_ids"] = True
    ruleset = load_rules(args.rules)
    for error in ruleset.errors:
        print_error(str(error))
    if not len(ruleset):
        print_error(f"cep run: no rule could be loaded from {args.rules}")
        return EXIT_QUERY_ERROR
    started = time.perf_counter()
    alerts: list[dict] = []
    failed = 0
    bad_rows: dict[str, int] | None = None
    try:
        data, events, bad_rows = _rule_set_input(args, ruleset, engine, kafka)
        for rule in ruleset:
            try:
                matches = compile_rule(rule, alert_columns=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    found = (
                        matches.run(data, **options)
                        if engine == "python"
                        else _spark_rows(matches.on_spark(data, **options), matches)
                    )
            except cep.CepError as err:  # this rule's failure: the others run, as in cep stream
                print_error(f"rule {rule.rule_id} failed (cep stream quarantines it): {err}")
                failed += 1
                continue
            alerts += rule_alerts(rule, found, suppress=specs)
    except cep.CepError as err:
        print_error(str(err))
        return EXIT_QUERY_ERROR
    except Exception as exc:
        return _spark_failure(exc, args.rules)
    table = pd.DataFrame(alerts, columns=list(ALERT_REPLAY_NAMES))
    table = table.sort_values(["rule_id", "last_event_time", "match_id"], kind="stable").reset_index(drop=True)
    if args.output:
        write_output(table, args.output, keep_formulas=args.csv_keep_formulas)
        print(f"wrote {len(table)} alerts to {args.output}")
    elif len(table):
        print(format_table(table))
    else:
        print("(no alerts)")
    suppressed = int(table["suppressed"].sum()) if len(table) else 0
    print(
        f"rules: {len(ruleset)}, events read: {events}, alerts: {len(table)}"
        + (f" ({suppressed} suppressed)" if suppressed else "")
        + f", seconds: {time.perf_counter() - started:.2f} (engine: {engine}; ids as cep stream --rules gives them)"
    )
    if bad_rows is not None:
        print(
            bad_rows_summary(bad_rows, args.dead_letter)
            if args.dead_letter
            else f"bad rows: {sum(bad_rows.values())} (set aside; --dead-letter FILE keeps them)"
        )
    return EXIT_QUERY_ERROR if ruleset.errors or failed else EXIT_OK


def _rule_set_input(args: argparse.Namespace, ruleset, engine: str, kafka: KafkaInput | None):
    """(the events for the rules, how many were read, the bad rows by reason or None): files as ``cep run``
    reads them; a Kafka topic's messages with the bad ones set aside as ``cep stream`` does."""
    if kafka is None:
        fmt = input_format(args.input, args.input_format)
        # --schema types a CSV's columns as for one query, so that a rule computes in the stream's types.
        declared = Inputs.parse(args.input, args.schema, args.input_format).schemas.get(None)
        if engine == "python":
            data = read_pandas(args.input, fmt, declared)
            return data, len(data), None
        data = read_spark(start_spark(args.master, delta=fmt == "delta"), args.input, fmt, declared)
        return data, data.count(), None
    from pyspark.sql import functions as F

    spark = start_spark(args.master, kafka=True)
    events = read_kafka_static(spark, kafka)
    readable = [c for c in events.columns if c != CORRUPT_RECORD]
    time_column = next((t for t in (event_time_of(rule, readable) for rule in ruleset) if t is not None), None)
    good, bad = set_aside_bad_rows(events, time_column)
    counts = bad.groupBy("_cep_error").agg(F.count(F.lit(1)).alias("n")).collect()
    bad_rows = {row["_cep_error"]: row["n"] for row in counts}
    if args.dead_letter:
        write_dead_letter([row.asDict() for row in bad.collect()], args.dead_letter)
    data = arrow_to_pandas(good.toArrow()) if engine == "python" else good
    count = len(data) if engine == "python" else data.count()
    return data, count + sum(bad_rows.values()), bad_rows


def add_command(sub: Any, formats: Sequence[str]) -> None:
    run = sub.add_parser(
        "run",
        help="run a query over input files and print the matches",
        description="Run the SQL statement in QUERY_FILE (one or more MATCH_RECOGNIZE clauses, anywhere a table "
        "may stand) over the inputs; print the rows as a table and a summary line.",
    )
    run.add_argument("query_file", metavar="QUERY_FILE", nargs="?", help="statement file, - for stdin (or --rules)")
    run.add_argument(
        "--rules",
        "-r",
        metavar="DIR",
        help="replay a rule set (the directory cep stream --rules runs) instead of one query: the alerts "
        "with the ids, versions and suppression of the live stream (give it the stream's --session-timeout "
        "and --suppress)",
    )
    run.add_argument(
        "--suppress", action="append", metavar="RULE=DURATION", help="with --rules: as cep stream's --suppress"
    )
    run.add_argument(
        "--input",
        "-i",
        action="append",
        metavar="[NAME=]PATH",
        help=INPUT_HELP + ". Or Kafka topics: kafka://HOST:PORT/TOPIC (the messages they hold now; see "
        "docs/streaming.md)",
    )
    add_input_format_option(run, formats, "input format (default: from the file extension; Kafka: json or csv)")
    run.add_argument(
        "--kafka-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of Spark's Kafka source (startingOffsets, endingOffsets, kafka.security.protocol, ...); "
        "@FILE reads KEY=VALUE lines",
    )
    run.add_argument(
        "--kafka-encoding",
        metavar="NAME",
        help="the encoding of the Kafka messages' values and keys: utf-8 (default: a message that is not valid "
        "UTF-8 is a not_utf8 bad row) or latin-1 (every byte a character); as the stream's --kafka-encoding",
    )
    run.add_argument(
        "--schema",
        action="append",
        metavar="[NAME=]COLUMNS",
        help=SCHEMA_HELP + ". For Kafka: the columns of a message value (default for JSON: from the last messages)",
    )
    run.add_argument(
        "--engine",
        choices=("spark", "python"),
        default=None,
        help="python: the pure-Python matcher (DuckDB for the SQL around it); spark: a Spark job. Default: python for "
        f"local files up to {PYTHON_MAX_BYTES // 2**20} MiB, else spark",
    )
    run.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the rows to FILE (.csv, .parquet or .json) instead of printing them, or append them "
        "to a Delta table: delta:PATH (once per statement and input versions)",
    )
    run.add_argument(
        "--delta-version",
        type=non_negative_int,
        metavar="N",
        help="read every Delta input (delta:PATH) as of its version N (one input: delta:PATH@vN)",
    )
    run.add_argument(
        "--delta-timestamp",
        metavar="TS",
        help="read every Delta input as of the latest version committed at or before TS (ISO 8601, "
        "UTC unless it names a zone; one input: delta:PATH@2026-01-05T00:00:00)",
    )
    run.add_argument("--limit", type=non_negative_int, metavar="N", help="keep at most N output rows")
    run.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show a progress bar on stderr (python engine; default: on a terminal, from {PROGRESS_MIN_ROWS:,} rows)",
    )
    run.add_argument(
        "--master", default=DEFAULT_MASTER, help="Spark master URL (default: %(default)s; giving one picks spark)"
    )
    run.add_argument(
        "--dead-letter",
        metavar="FILE",
        help="set bad rows (NULL or unreadable event time, a value of the wrong type...) aside to FILE "
        "as JSON lines with their reason, and match the rest; the summary counts them",
    )
    run.add_argument(
        "--session-timeout",
        metavar="DURATION",
        help="replay as a stream with this session timeout would match: a partition's rows more than "
        "DURATION apart (event time, e.g. '30 minutes', '90s') are matched as separate sessions",
    )
    run.add_argument(
        "--match-ids",
        action="store_true",
        help="add a last column match_id: the id the stream gives the same match (cep stream's alerts)",
    )
    run.add_argument(
        "--rule-id",
        metavar="ID",
        help="give each match the id cep stream gives the alert of this statement as rule ID (the rules file's "
        "stem, then /NAME for a named statement; implies --match-ids). Without it the ids are those of the "
        "statement's own text (Query.on_spark's), since a query file alone has no rule id",
    )
    run.add_argument(
        "--csv-keep-formulas",
        action="store_true",
        help="in a .csv output, write text starting with = + - @ as it is (by default it gets a leading ' "
        "so that a spreadsheet shows it instead of running it)",
    )
    run.set_defaults(func=cmd_run)

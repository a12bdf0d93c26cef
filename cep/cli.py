"""The ``cep`` command: run, check, format and explain MATCH_RECOGNIZE queries.

    cep run QUERY_FILE [--input [NAME=]PATH ...] [--engine spark|python] [--output FILE]
            [--session-timeout DURATION] [--match-ids] ...                      (cep/run_cli.py)
    cep run QUERY_FILE --input kafka://HOST:PORT/TOPIC [--kafka-option KEY=VALUE]... [--schema COLUMNS]
    cep check FILE ... [--schema 'ts TIMESTAMP, symbol STRING, price DOUBLE']
    cep fmt FILE
    cep explain FILE [--format text|dot|svg|png] [--output FILE]
    cep trace QUERY_FILE --input PATH [--partition COLUMN=VALUE ...] [--from X] [--to X] [--events KINDS]
    cep report QUERY_FILE --input PATH --out report.html [--column NAME] [--partitions N]
    cep stream (--rules DIR | QUERY_FILE) --input DIR --checkpoint DIR [--sink ...]   (cep/stream_cli.py)
    cep status --checkpoint DIR                                        (cep/status_cli.py)
    cep deliver --checkpoint DIR [--sink webhook URL]

Exit codes: 0 ok; 1 the query is wrong (the rendered error goes to stderr, never a traceback);
2 bad usage, an input/output file that cannot be read or written, or a missing helper program
(Graphviz's ``dot`` for svg/png) or library (plotly for ``report``); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import cep
from cep import report, run_cli, status_cli, stream_cli
from cep import report as report_module  # build_parser's local `report` is the subcommand
from cep.cli_io import (  # noqa: F401 - infer_datetimes and spark_error are part of the command's Python surface
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_USAGE,
    FORMATS,
    INPUT_HELP,
    SCHEMA_HELP,
    Inputs,
    KafkaInput,
    UsageError,
    add_input_format_option,
    format_of,
    infer_datetimes,
    input_format,
    input_schema,
    non_negative_int,
    pandas_schema,
    print_error,
    read_kafka_static,
    read_pandas,
    read_text,
    spark_error,
    statement_inputs,
    write_output,
)
from cep.grammar.columns import ColumnNames
from cep.grammar.format import format_clauses, format_statement
from cep.grammar.parser import parse_part, parse_schema, split_statements
from cep.grammar.statement import split
from cep.matcher.explain.dot import GraphvizMissing, render, to_dot
from cep.matcher.rows.tables import pandas_to_columns
from cep.matcher.vector.arrays import groupers
from cep.spark_bridge.alerting.rule_set import build_rule_set
from cep.statement import ENGINES, check_sql
from cep.table_text import cell, format_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Imported inside functions: pandas (heavy; `cep check` and `cep fmt` never need it), rich (only the progress
# bar of a large input) and pyspark (optional: the "spark" extra).


# ------------------------------------------------------------------------------------------ commands


def _load_schema(text: str | None) -> dict[str, str] | None:
    """The ``--schema`` option as ``{column: type}`` (the checker's parser, so its type names agree)."""
    if not text:
        return None
    try:
        return parse_schema(text)
    except cep.CepError as err:
        raise UsageError(f"invalid --schema:\n{err}") from None


def parse_and_check(
    text: str, filename: str, schema: dict[str, str] | None, engine: str = "python", tables: dict | None = None
) -> list[Any]:
    """Every statement of a file, checked as ``cep run`` runs it (``cep.statement.check_sql``: each
    MATCH_RECOGNIZE clause, against ``schema`` when given (``tables``: a named table's columns for the clauses
    that read it), and the SQL around them); raises CepError.
    Each statement is checked apart from the file, from the start of its first line (what precedes it on
    that line blanked), and an error's positions are then moved to the file's: the work grows with the
    file, not with the square of its statements, and a statement's length is its own."""
    statements = []
    line, counted = 1, 0  # the line at offset `counted`, advanced statement by statement
    for start, end, _name in split_statements(text):
        newline = text.find("\n", start, end)
        if newline >= 0 and not text[start:newline].strip():  # the usual case: it starts on a line of its own
            start = newline + 1
        line += text.count("\n", counted, start)
        counted = start
        line_start = text.rfind("\n", 0, start) + 1
        try:
            body = " " * (start - line_start) + text[start:end]
            statements.append(check_sql(body, filename=filename, schema=schema, engine=engine, tables=tables))
        except cep.CepError as error:
            raise error.moved(line - 1, line_start).with_source(text, filename) from None
    if not statements:
        cep.parse_all(text, filename=filename)  # the empty file's own error
    return statements


def cmd_check(args: argparse.Namespace) -> int:
    if args.schema and args.input:
        raise UsageError("give --schema or --input, not both")
    schema, tables = _load_schema(args.schema), None
    if args.input:  # the columns and types of the data files, read as `cep run -i [NAME=]PATH` reads them
        default, named = Inputs.parse(args.input, None, args.input_format).read_pandas()
        schema = None if default is None else pandas_schema(default)
        tables = {name: pandas_schema(data) for name, data in named.items()}
        if tables and (args.rules or any(os.path.isdir(path) for path in args.files)):
            raise UsageError("rules read one input, the stream's: give it without NAME=")
    status = EXIT_OK
    for path in args.files:
        if args.rules or os.path.isdir(path):
            status = max(status, _check_rules(path, schema))
            continue
        try:
            text = read_text(path)
        except UsageError as exc:
            print_error(f"cep check: {exc}")
            status = max(status, EXIT_USAGE)
            continue
        try:
            statements = parse_and_check(text, path, schema, args.engine, tables)
        except cep.CepError as err:
            print_error(str(err.with_source(text, path)))
            status = max(status, EXIT_QUERY_ERROR)
            continue
        count = len(statements)
        print(f"{path}: ok ({count} statement{'' if count == 1 else 's'})")
    return status


def _check_rules(path: str, schema: dict[str, str | None] | None) -> int:
    """``cep check --rules PATH`` (or a directory): the rules loaded by the loader ``cep stream`` and
    ``cep run --rules`` use, with their verdict per statement; with a schema, also every check the stream
    makes against its input (``rule_set.build_rule_set``)."""
    if not os.path.exists(path):
        print_error(f"cep check: rules not found: {path}")
        return EXIT_USAGE
    if schema:
        _, ruleset = build_rule_set(path, input_types={name: kind or "VARCHAR" for name, kind in schema.items()})
    else:
        ruleset = cep.load_rules(path)
    for error in ruleset.errors:
        print_error(str(error))
    count = len(ruleset)
    summary = f"{path}: {count} rule{'' if count == 1 else 's'} ok"
    summary += f", {len(ruleset.errors)} with errors (cep stream skips them)" if ruleset.errors else ""
    if not schema:  # "ok" would promise more than was checked: a misspelt column passes, and the stream skips it
        summary += "; columns and types not checked: give --input FILE or --schema COLUMNS for the stream's verdicts"
    print(summary)
    return EXIT_QUERY_ERROR if ruleset.errors else EXIT_OK


# The single-clause parser's errors for what only a whole statement holds (a subquery, WITH, a join, a window
# function outside the clause, a Spark function the clause language lacks such as typeof() in the outer
# SELECT, ...): `cep fmt` then reads the text as a whole statement, as `cep run` does, and reports that
# reading's error if it has one (an unknown function is then E0250, as `cep check` and `cep run` say).
WHOLE_STATEMENT_ONLY = ("E0107", "E0244", "E0230")


def format_text(text: str, filename: str | None = None) -> str:
    """The canonical text of every statement in ``text`` (comments other than ``-- name:`` are dropped)."""
    if hasattr(cep, "format_query"):
        return cep.format_query(text)
    parts = []
    for start, end, name in split_statements(text):
        try:
            body = format_statement(parse_part(text, start, end, filename=filename))
        except cep.CepError as error:
            if error.code not in WHOLE_STATEMENT_ONLY:
                raise error.with_source(text, filename) from None
            # A whole statement (WITH, subqueries, joins, window functions): its clauses in canonical layout.
            # The statement is read in place (the text before it blanked, newlines kept), so that an error's
            # line and column are the file's.
            body = format_clauses(split(re.sub(r"[^\n]", " ", text[:start]) + text[start:end], filename=filename))
        parts.append(f"-- name: {name}\n{body}" if name else body)
    return parts[0] if len(parts) == 1 else ";\n\n".join(parts) + ";"


def cmd_fmt(args: argparse.Namespace) -> int:
    text = read_text(args.file)
    try:
        formatted = format_text(text, args.file)
    except cep.CepError as err:
        print_error(str(err.with_source(text, args.file)))
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


def _clause_position(args: argparse.Namespace, statement: Any) -> int:
    """``--clause N`` (counted from 1) as an index into the statement's MATCH_RECOGNIZE clauses."""
    count = len(statement.clauses)
    if not 1 <= args.clause <= count:
        clauses = f"{count} MATCH_RECOGNIZE clause{'s' * (count != 1)}"
        raise UsageError(f"--clause {args.clause}: the statement has {clauses}")
    return args.clause - 1


def clause_and_rows(args: argparse.Namespace, text: str, filename: str) -> tuple[Any, pd.DataFrame]:
    """The ``--clause`` of the whole statement in ``text`` and the rows it reads from the inputs, as ``cep run``
    reads them (``cli_io.statement_inputs``); raises CepError and UsageError."""
    inputs = Inputs.parse(args.input, args.schema, args.input_format)
    statement = cep.compile_sql(text, filename=filename)
    return statement_inputs(statement, inputs, position=_clause_position(args, statement))


def cmd_explain(args: argparse.Namespace) -> int:
    text = read_text(args.file)
    fmt = args.format
    if fmt is None:  # from --output's extension, else the text listing
        ext = os.path.splitext(args.output or "")[1].lower().lstrip(".")
        fmt = ext if ext in EXPLAIN_FORMATS[1:] else "text"
    try:
        if args.input:  # the clause checked against the columns it reads, as cep run checks it
            query, rows = clause_and_rows(args, text, args.file)
            query.plan.machine(tuple(str(c) for c in rows.columns))
        else:
            statement = cep.compile_sql(text, filename=args.file)
            query = statement.query(statement.clauses[_clause_position(args, statement)])
    except cep.CepError as err:
        print_error(str(err.with_source(text, args.file)))
        return EXIT_QUERY_ERROR
    if fmt == "text":
        _emit(query.explain(), args.output)
        return EXIT_OK
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


def _partition_filter(query: Any, pdf: pd.DataFrame, specs: Sequence[str]) -> tuple[pd.DataFrame, str]:
    """The rows of the one partition that ``--partition COLUMN=VALUE`` options pick, and its description.

    Values are compared as ``cep run`` prints them, so what a run shows can be pasted back here.
    """
    columns = list(query.plan.partition_names(pdf.columns))
    partition_columns = ColumnNames(columns)
    chosen: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--partition expects COLUMN=VALUE, e.g. --partition 'symbol=ACME'; got {spec!r}")
        column = partition_columns.find_name(name.strip())
        if column is None:
            by = ", ".join(columns) if columns else "nothing (it has no PARTITION BY)"
            raise UsageError(f"--partition {name.strip()}: the query partitions by {by}")
        chosen[column] = value
    subset = pdf
    for column, value in chosen.items():
        cells = subset[column].map(cell)
        if not (cells == value).any():
            known = sorted(set(pdf[column].map(cell)))
            sample = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
            raise UsageError(f"no rows with {column}={value} (values of {column}: {sample})")
        subset = subset[cells == value]
    rest = [c for c in columns if c not in chosen]
    groups = subset.groupby(groupers(subset, rest), dropna=False).ngroups if rest else 1
    if groups > 1:
        first = subset.iloc[0]
        hint = " ".join(f"--partition '{c}={cell(first[c])}'" for c in columns)
        raise UsageError(f"the input holds {groups} partitions; pick one, e.g. {hint}")
    first = subset.iloc[0] if len(subset) else None
    described = ", ".join(f"{c}={cell(first[c])}" for c in columns) if first is not None else ""
    return subset, described or "(the whole input: no PARTITION BY)"


def _bound(text: str | None, series: pd.Series, option: str) -> Any:
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


def trace_table(
    query: Any,
    pdf: pd.DataFrame,
    *,
    show: Sequence[str] = (),
    events: Sequence[str] = TRACE_EVENTS,
    low: Any = None,
    high: Any = None,
) -> pd.DataFrame:
    """``Query.trace`` of ``pdf`` (one partition) with the ORDER BY value and the ``show`` columns of each
    row, restricted to ``events`` and to order values in [low, high]."""
    trace = query.trace(pdf)
    columns = pandas_to_columns(pdf)
    machine = query.plan.machine(tuple(columns))
    order = query.plan.order_columns[0] if query.plan.order_columns else "order_key"
    parts = query.plan.partitions(machine, columns)
    positions = parts[0][1] if parts else []
    table = trace.drop(columns=["partition"]).rename(columns={"order_key": order})
    for name in show:
        values = pdf[name].tolist()
        table.insert(
            2 + list(show).index(name),
            name,
            [values[positions[r]] if 0 <= r < len(positions) else None for r in table["row"]],
        )
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
    text = read_text(args.query_file)
    events = [e.strip() for e in args.events.split(",") if e.strip()] if args.events else list(TRACE_EVENTS)
    unknown = sorted(set(events) - set(TRACE_EVENTS))
    if unknown:
        raise UsageError(f"--events: unknown kind {', '.join(unknown)} (kinds: {', '.join(TRACE_EVENTS)})")
    if args.output:
        format_of(args.output, None, what="output file")
    try:
        query, pdf = clause_and_rows(args, text, args.query_file)
        part, described = _partition_filter(query, pdf, args.partition or [])
        order_column = next(iter(query.plan.order_names(part.columns)), None)
        if order_column is None and (args.start or args.end):
            raise UsageError("--from and --to need a query with an ORDER BY column")
        order_series = part[order_column] if order_column is not None else None
        low, high = _bound(args.start, order_series, "--from"), _bound(args.end, order_series, "--to")
        if args.columns is None:
            show = query.plan.condition_columns(part.columns)
        else:
            wanted = [c.strip() for c in args.columns.split(",") if c.strip()]
            missing = [c for c in wanted if c not in part.columns]
            if missing:
                raise UsageError(
                    f"--columns: no column {', '.join(missing)} in the input "
                    f"(columns: {', '.join(map(str, part.columns))})"
                )
            show = wanted
        show = [c for c in show if c != order_column]
        table = trace_table(query, part, show=show, events=events, low=low, high=high)
    except cep.CepError as err:
        print_error(str(err.with_source(text, args.query_file)))
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
    text = read_text(args.query_file)
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {args.out}: no directory {parent}")
    try:
        query, pdf = clause_and_rows(args, text, args.query_file)
        html = report.build_report(
            query,
            pdf,
            column=args.column,
            max_partitions=args.partitions,
            sources=list(args.input or ()),
            plotly=args.plotly,
        )
    except ImportError as exc:  # plotly missing
        raise UsageError(f"cep report needs plotly ({exc}): pip install 'cep-spark[report]'") from None
    except cep.CepError as err:
        print_error(str(err.with_source(text, args.query_file)))
        return EXIT_QUERY_ERROR
    except report.ReportError as exc:
        raise UsageError(str(exc)) from None
    written = {args.out: html.text, **{os.path.join(parent, name): text for name, text in html.assets.items()}}
    for path, content in written.items():
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(content)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc}") from None
    beside = "".join(f", and {name} beside it" for name in html.assets)
    print(f"wrote {args.out} ({html.summary}){beside}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------- parser


def _input_options(command: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The inputs of ``cep run`` (``cli_io.Inputs``) for a command that looks at one clause of a statement."""
    what = "" if required else " (optional: check the clause against the columns it reads)"
    command.add_argument("--input", "-i", action="append", metavar="[NAME=]PATH", help=INPUT_HELP + what)
    # explain's --format is its picture's: its inputs' is --input-format alone
    add_input_format_option(
        command, FORMATS, "input format (default: from the file extension)", format_too=command.prog != "cep explain"
    )
    command.add_argument("--schema", action="append", metavar="[NAME=]COLUMNS", help=SCHEMA_HELP)
    command.add_argument(
        "--clause",
        type=int,
        default=1,
        metavar="N",
        help="the MATCH_RECOGNIZE clause of the statement to look at, counted from 1 (default: 1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cep",
        description="Complex event processing: SQL:2016 MATCH_RECOGNIZE queries over event data, "
        "on Spark or in plain Python.",
        epilog="Exit codes: 0 ok, 1 query error, 2 usage or file error (or a missing helper program), 130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run_cli.add_command(sub, FORMATS)

    _add_check_command(sub)
    _add_fmt_command(sub)
    _add_explain_command(sub)
    _add_trace_command(sub)
    _add_report_command(sub)
    stream_cli.add_commands(sub)  # `cep stream`: alerting over a stream (docs/alerting.md, docs/operations.md)
    status_cli.add_commands(sub)  # `cep status` and `cep deliver`
    return parser


def _add_check_command(sub) -> None:
    """``cep check``: parse and check query files without running them."""
    check = sub.add_parser(
        "check",
        help="parse and check query files without running them",
        description="Parse and check every statement of each FILE; print each error with its position.",
    )
    check.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="query file(s), - for standard input; a directory is checked as a rule set",
    )
    check.add_argument(
        "--rules",
        action="store_true",
        help="check the files as alert rules, with the verdicts of cep stream and cep run --rules "
        "(names, options, summary templates, what a stream cannot run)",
    )
    check.add_argument(
        "--schema",
        metavar="COLUMNS",
        help="input columns and types to check against, e.g. 'ts TIMESTAMP, symbol STRING, price DOUBLE'",
    )
    check.add_argument(
        "--input",
        "-i",
        action="extend",
        nargs="+",
        metavar="[NAME=]DATA",
        help="check against the columns and types of these data files (csv, parquet, json), read as cep run "
        "reads its --input: without NAME=, the table the first MATCH_RECOGNIZE reads; NAME=PATH: the table NAME",
    )
    add_input_format_option(check, FORMATS, "the data files' format (default: from their extension)")
    check.add_argument(
        "--engine",
        choices=ENGINES,
        default="python",
        help="the engine the statements will run on, as cep run's --engine (default: python): for the python "
        "engine, what it would refuse to translate from Spark SQL is reported too",
    )
    check.set_defaults(func=cmd_check)


def _add_fmt_command(sub) -> None:
    """``cep fmt``: print a query in canonical form."""
    fmt = sub.add_parser(
        "fmt",
        help="print a query in canonical form",
        description="Print the canonical formatting of the queries in FILE.",
    )
    fmt.add_argument("file", metavar="FILE", help="query file (- reads standard input)")
    fmt.set_defaults(func=cmd_fmt)


def _add_explain_command(sub) -> None:
    """``cep explain``: the compiled program of a query, or its automaton."""
    explain = sub.add_parser(
        "explain",
        help="print the compiled program of a query, or draw its automaton",
        description="Compile the query in FILE and print the program the matcher runs, its conditions and "
        "execution path (text), or the pattern's automaton as Graphviz DOT, SVG or PNG (svg and png need "
        "Graphviz's 'dot' program).",
    )
    explain.add_argument("file", metavar="FILE", help="query file (- reads standard input)")
    explain.add_argument(
        "--format",
        "-f",
        choices=EXPLAIN_FORMATS,
        help="text (default), dot, svg or png (default: from --output's extension, else text)",
    )
    explain.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    _input_options(explain, required=False)
    explain.set_defaults(func=cmd_explain)


def _add_trace_command(sub) -> None:
    """``cep trace``: row by row, why a partition did or did not match."""
    trace = sub.add_parser(
        "trace",
        help="show, row by row, why a partition did or did not match",
        description="Run the query over one partition of the input with a tracer: for each row, the "
        "conditions tested and their result, the partial matches alive (by pattern position), those "
        "dropped and why, and where matches began and ended.",
    )
    trace.add_argument("query_file", metavar="QUERY_FILE", help="file holding the statement (- reads standard input)")
    _input_options(trace)
    trace.add_argument(
        "--partition",
        "-p",
        action="append",
        metavar="COLUMN=VALUE",
        help="the partition to trace, e.g. 'symbol=ACME'; repeat for each PARTITION BY column",
    )
    trace.add_argument(
        "--from", dest="start", metavar="X", help="show records from this ORDER BY value on (e.g. '2024-01-02 09:40')"
    )
    trace.add_argument("--to", dest="end", metavar="X", help="show records up to this ORDER BY value")
    trace.add_argument(
        "--events",
        metavar="KINDS",
        help=f"comma-separated record kinds to show (default: all of {','.join(TRACE_EVENTS)})",
    )
    trace.add_argument(
        "--columns", metavar="NAMES", help="input columns to show per row (default: those the DEFINE conditions read)"
    )
    trace.add_argument("--output", "-o", metavar="FILE", help="write the trace to FILE (.csv, .parquet or .json)")
    trace.set_defaults(func=cmd_trace)


def _add_report_command(sub) -> None:
    """``cep report``: a self-contained HTML report of a query's matches."""
    report = sub.add_parser(
        "report",
        help="write a self-contained HTML report of a query's matches",
        description="Run the query over the input (pure-Python engine) and write one HTML file with the "
        "query, summary counts, matches per partition and over time, match length and duration "
        "histograms, a match explorer (click a match to zoom its partition's chart to it), charts of a "
        "column with the matched rows shaded and coloured by CLASSIFIER, why attempts were dropped in the "
        "range a chart shows, and dropped attempts by reason. Interactive Plotly charts, embedded with "
        "plotly.js: the file needs no network to view (--plotly file or cdn for a small page). The statement and "
        "inputs are those of cep run; the report looks at one MATCH_RECOGNIZE clause (--clause). Needs plotly.",
    )
    report.add_argument("query_file", metavar="QUERY_FILE", help="file holding the statement (- reads standard input)")
    _input_options(report)
    report.add_argument(
        "--out", "--output", "-o", dest="out", required=True, metavar="FILE", help="the HTML file to write"
    )
    report.add_argument(
        "--column",
        "-c",
        metavar="NAME",
        help="column to chart per partition (default: the first numeric column the conditions "
        "read, else any numeric column, else a text column they read, drawn as lanes of events)",
    )
    report.add_argument(
        "--partitions",
        "-n",
        type=non_negative_int,
        default=4,
        metavar="N",
        help="chart at most N partitions, those with the most matches (default: %(default)s)",
    )
    report.add_argument(
        "--plotly",
        choices=report_module.PLOTLY_MODES,
        default="embed",
        help="how the page gets plotly.js: embed (default: inside the page, about 4.8 MB, opens "
        "anywhere offline), file (a small page and plotly-VERSION.min.js written beside it, "
        "shared by the reports of a folder), cdn (a small page that fetches it from cdn.plot.ly: "
        "online only)",
    )
    report.set_defaults(func=cmd_report)


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
        print_error(f"cep {args.command}: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        print_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `cep run ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The pieces the translation of Spark SQL to DuckDB SQL is built from (cep/duckdb_sql.py and
cep/duckdb_functions.py): the refusal, the types the rules read, DuckDB calls written as is, and Spark's
readings of text in a cast (to DATE, TIMESTAMP, a fraction, BOOLEAN), explicit or implicit (text given
to a function that takes a DATE or TIMESTAMP)."""

from __future__ import annotations

import datetime as dt
import re

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).


class Refusal(Exception):
    """The python engine cannot run a part of the statement as Spark does. ``start``: the offset of the
    part in the Spark SQL text that was translated (None when it cannot be told). ``spark_too``: Spark
    refuses it as well (a cast its ANSI rules do not allow), so the error is the statement's, not the engine's.
    ``untyped``: refused only because a value's type could not be told, which `cep check` (no tables) leaves
    to the run. ``column``: the result column the refusal is about (a value the python engine cannot return),
    which the caller places at the expression that gives it; set once, here, as every other field."""

    def __init__(
        self,
        message: str,
        start: int | None = None,
        length: int = 1,
        *,
        spark_too: bool = False,
        untyped: bool = False,
        column: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.start, self.length, self.spark_too = message, start, length, spark_too
        self.untyped, self.column = untyped, column

    def placed(self, start: int | None, length: int) -> Refusal:
        """The same refusal at ``start`` (``length`` characters) of the statement's text."""
        return Refusal(self.message, start, length, spark_too=self.spark_too, untyped=self.untyped, column=self.column)


INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


FRACTIONAL = ("FLOAT", "DOUBLE", "DECIMAL")


TEXT_TYPES = ("VARCHAR", "TEXT", "CHAR", "NCHAR", "NVARCHAR")


TIME_TYPES = ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ", "DATETIME")


TYPED_META = "cep_typed"  # the meta key of a node whose type the rules need


def type_of(node, types: dict[int, str]) -> str | None:
    found = types.get(node.meta.get(TYPED_META))
    if found in ("INT", "INTEGER", "UINT"):
        return "INT"
    return found


PLACE_META = "cep_place"  # the place of a node as parsed, kept while the translation replaces its operands


def place_of(node) -> tuple[int | None, int]:
    """The offset and length of ``node`` in the text sqlglot parsed: its own position, else its first
    descendant's, else the place it had before the translation replaced its operands (``keep_places``)."""
    positions = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    if "start" in node.meta:
        return node.meta["start"], node.meta.get("end", node.meta["start"]) - node.meta["start"] + 1
    if positions:
        return min(positions), 1
    return node.meta.get(PLACE_META, (None, 1))


def keep_places(tree) -> None:
    """Each node of ``tree`` keeps its place (``place_of``) before the translation replaces its operands
    with nodes of no place (a cast of a cast, each translated: the outer one's refusal needs a place)."""
    for node in tree.walk():
        place = place_of(node)
        if place[0] is not None:
            node.meta[PLACE_META] = place


def foldable(node) -> bool:
    """Whether Spark computes ``node`` before running (it reads no column, no subquery, no aggregate or
    window): its analyser then reads a text cast to a DATE or TIMESTAMP as a special value too ('today')."""
    from sqlglot import exp

    return node.find(exp.Column, exp.Select, exp.AggFunc, exp.Window, exp.Rand) is None


def call_duck(name: str, *args):
    """A call of DuckDB's function ``name``, written as is."""
    from sqlglot import exp

    return exp.Anonymous(this=name, expressions=list(args))


def java_trimmed(text):
    """``text`` trimmed as Java's String.trim does (spaces and control characters), as Spark's casts trim."""
    from sqlglot import exp

    return call_duck(
        "regexp_replace",
        text.copy(),
        exp.Literal.string("^[\\x00-\\x20]+|[\\x00-\\x20]+$"),
        exp.Literal.string(""),
        exp.Literal.string("g"),
    )


# On sqlglot's sum of the intervals of Spark's one multi-field literal (``INTERVAL 1 DAY 2 HOURS``), set by the parser.
INTERVAL_FIELDS_META = "cep_interval_fields"

PLACE_MARK = "cep@"
# After the place: the error is the python engine's alone (Spark gives a value), not one of Spark's ANSI errors.
ENGINE_ONLY_MARK = "!"


def fail_with(message: str, where: tuple[int | None, int], kind=None, *, element_of=None, spark_fails: bool = True):
    """An expression that raises ``message`` when DuckDB evaluates it (Spark's ANSI errors), with the place
    of the expression for ``explain_duck_error``. Not DuckDB's ``error()``: it is volatile, and DuckDB
    refuses a volatile expression in a window's ORDER BY (``rank() OVER (ORDER BY i % i)``, which Spark
    runs). A cast of the message to an integer fails as surely and is deterministic; DuckDB's constant
    folding leaves an expression that fails for it to run time, so only a row that takes the branch fails.
    It has the type of the value it stands for: ``kind`` (a type name), or an element of the array
    ``element_of``: DuckDB's optimizer drops an expression it can prove is always NULL (a NULL-typed
    ``CASE`` whose other branches fold to NULL, inside ``COALESCE`` or ``IS NULL``), and the error with it.
    Without either, its type is NULL's, for a branch beside a value of a type of its own. ``spark_fails``
    False: Spark gives a value where this fails, so the message must not say that Spark fails too."""
    from sqlglot import exp

    start, length = where
    mark = "" if spark_fails else ENGINE_ONLY_MARK
    # Without a place the mark still says the error is Spark's (explain_duck_error finds the place then).
    place = f"{PLACE_MARK}{'' if start is None else start}+{length}{mark}: "
    raises = exp.Cast(this=exp.Literal.string(place + message), to=exp.DataType.build("INT"))
    if element_of is not None:
        return call_duck("list_extract", element_of.copy(), raises)
    if kind is not None:
        as_text = exp.Cast(this=raises, to=exp.DataType.build("VARCHAR"))
        return exp.Cast(this=as_text, to=kind.copy() if isinstance(kind, exp.DataType) else exp.DataType.build(kind))
    return exp.Case(ifs=[exp.If(this=exp.Is(this=raises, expression=exp.Null()), true=exp.Null())])


def epoch_seconds(value, per_second: int = 1_000_000):
    """Whole seconds since 1970 of a timestamp, rounded down (Spark's CAST(ts AS BIGINT), unix_timestamp,
    unix_seconds); whole milliseconds with ``per_second`` 1000 (unix_millis)."""
    from sqlglot import exp

    micros = call_duck("epoch_us", exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP")))
    million = exp.Literal.number(per_second)
    below = exp.Mod(
        this=exp.Paren(
            this=exp.Add(this=exp.Mod(this=micros.copy(), expression=million.copy()), expression=million.copy())
        ),
        expression=million.copy(),
    )
    return exp.IntDiv(
        this=exp.Paren(this=exp.Sub(this=micros, expression=exp.Paren(this=below))), expression=million.copy()
    )


# The text Spark's ANSI cast reads as a DATE or a TIMESTAMP (without a zone): a year of four to seven digits
# (a '+' before it too), then optionally month, day (one or two digits each) and, for a timestamp, the hour,
# then minutes, seconds and a fraction (its digits past the sixth dropped, a point alone read); a date ignores
# what follows the day after ' ' or 'T'. Groups: 1 year ... 7 fraction.
_SPARK_TIME_TEXT = (
    r"\s*\+?(\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?)?)?)?\s*"
)
_SPARK_DATE_TEXT = r"\s*\+?(\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?\s*"
# A text whose year Spark reads before year 1: a '-' before its four to seven digits ('-0044-03-15' is 45 BC in
# Spark's proleptic calendar), or the year 0000 (1 BC). The python engine refuses it: Python's dates, which
# results and the clause's rows are read as, start at year 1, and DuckDB writes such a date as '0045-03-15 (BC)'
# where Spark writes '-0044-03-15'.
_YEAR_BEFORE_ONE = r"^[\x00-\x20]*(?:-[0-9]{4,7}|\+?0{4,7})(?:[^0-9]|$)"
_YEAR_BEFORE_ONE_REFUSED = (
    "the python engine cannot read a year before 1 (Spark reads '-0044-03-15' as 45 BC, the year 0000 as 1 BC); "
    "its dates start at 0001-01-01"
)
# A timestamp's text with a zone after it ('2021-03-28 01:30:00Z', '...+01:00', '... Europe/Berlin'): Spark
# reads the zone; the python engine refuses a literal one (and fails on one read from a row).
_ZONED_TIME_TEXT = re.compile(
    r"\s*\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{1,2}(?::\d{1,2}(?:\.\d{1,9})?)?)?\s*(?:Z|[+-]\d|[A-Za-z]).*", re.S
)


# Spark's special datetime values: words its analyser reads when it casts a text it can compute before
# running (a literal, `concat('to', 'day')`) to a DATE or TIMESTAMP, in the session's time zone (UTC in cep's
# sessions, as in the python engine). A text read from a column is never one (Spark's cast fails on it).
SPECIAL_DATETIMES = ("epoch", "now", "today", "tomorrow", "yesterday")
_SPECIAL_DAYS_FROM_TODAY = {"today": 0, "now": 0, "tomorrow": 1, "yesterday": -1}


def special_datetime(text: str) -> tuple[str, str] | None:
    """(word, time zone) when Spark reads ``text`` as a special datetime value: trimmed of spaces and control
    characters, a word of ``SPECIAL_DATETIMES`` in any case, then optionally a time zone ('today UTC';
    never after 'now'), as Spark's DateTimeUtils reads it; None otherwise."""
    trimmed = text.strip("".join(map(chr, range(33))))
    if len(trimmed) < 3 or not trimmed[0].isalpha():
        return None
    word, _, zone = trimmed.partition(" ")
    word, zone = word.lower(), zone.strip()
    if word not in SPECIAL_DATETIMES or (zone and word == "now"):
        return None
    return word, zone


def special_datetime_value(word: str, kind: str):
    """DuckDB's expression for Spark's special value ``word`` as a DATE or TIMESTAMP (UTC): 'now' is the
    statement's start, 'today' its midnight (a DATE: the day), 'epoch' 1970-01-01."""
    from sqlglot import exp

    if word == "epoch":
        return exp.Cast(this=exp.Literal.string("1970-01-01"), to=exp.DataType.build(kind))
    now = call_duck("timezone", exp.Literal.string("UTC"), call_duck("get_current_timestamp"))
    if word == "now" and kind == "TIMESTAMP":
        return now
    day = exp.Add(
        this=exp.Cast(this=now, to=exp.DataType.build("DATE")),
        expression=exp.Literal.number(_SPECIAL_DAYS_FROM_TODAY[word]),
    )
    return exp.Cast(this=day, to=exp.DataType.build(kind))


def _special_datetime_branches(text, kind: str, where: tuple[int | None, int]) -> list:
    """CASE branches giving Spark's special values for a text computed before running (not a literal). One
    with a time zone after it ('today Europe/Berlin', which Spark reads in that zone) fails, saying so."""
    from sqlglot import exp

    word = call_duck("lower", java_trimmed(text))
    branches = []
    for name in SPECIAL_DATETIMES:
        named = exp.EQ(this=word.copy(), expression=exp.Literal.string(name))
        branches.append(exp.If(this=named, true=special_datetime_value(name, kind)))
    zoned = call_duck("regexp_full_match", word.copy(), exp.Literal.string(_ZONED_SPECIAL_DATETIME))
    unreadable = fail_with(
        f"Spark reads its special {kind} value with a time zone ('today Europe/Berlin') in that zone; the python "
        "engine cannot: write it without the zone (it is read in UTC)",
        where,
        kind,
        spark_fails=False,
    )
    return [*branches, exp.If(this=zoned, true=unreadable)]


# A special value with a time zone after it, as _special_datetime reads one (lower case, trimmed).
_ZONED_SPECIAL_DATETIME = "(" + "|".join(word for word in SPECIAL_DATETIMES if word != "now") + r") .*"


# A typed literal in the statement's text: DATE '...' or TIMESTAMP '...' (groups 1 and 2: its type and text);
# the other alternatives consume text, quoted names and comments whole, so that no literal is seen in them.
_TYPED_TIME_LITERAL = re.compile(
    r"\b(date|timestamp(?:_ntz|_ltz)?)\s*'((?:[^'\\]|\\.)*)'|'(?:[^'\\]|\\.)*'|`[^`]*`|\"[^\"]*\"|--[^\n]*|/\*.*?\*/",
    re.I | re.S,
)


def check_typed_time_literals(text: str) -> None:
    """Refusal where a DATE '...' or TIMESTAMP '...' literal holds a text Spark cannot read: Spark's parser
    refuses the statement before running (DATE '-infinity'), wherever the literal stands, even where its
    value is never used (a constant PARTITION BY key, which the translation drops unevaluated)."""
    for found in _TYPED_TIME_LITERAL.finditer(text):
        if found.group(1) is None:
            continue
        kind, value = found.group(1).upper(), found.group(2)
        if re.match(_YEAR_BEFORE_ONE, value):
            raise Refusal(f"{_YEAR_BEFORE_ONE_REFUSED}: {kind} {value!r}", found.start(), found.end() - found.start())
        if not spark_reads_as_time(value, kind):
            raise Refusal(
                f"the value of the typed literal {kind} is invalid: {value!r} (Spark refuses it before running)",
                found.start(),
                found.end() - found.start(),
                spark_too=True,
            )


def spark_reads_as_time(value: str, kind: str) -> bool:
    """Whether Spark's cast reads the text ``value`` as a ``kind`` (DATE, else TIMESTAMP): its loose forms, a
    day and a clock that exist (years past 9999 pass), its special values, a timestamp with a zone."""
    fields = re.fullmatch(_SPARK_DATE_TEXT if kind == "DATE" else _SPARK_TIME_TEXT, value, re.ASCII)
    if special_datetime(value) is not None or (kind != "DATE" and _ZONED_TIME_TEXT.fullmatch(value)):
        return True
    if fields is None or len(fields.group(1)) != 4:
        return fields is not None
    numbers = [int(part) if part else default for part, default in zip(fields.groups()[:6], (1, 1, 1, 0, 0, 0))]
    try:
        dt.datetime(*numbers)
    except ValueError:
        return False
    return True


def text_to_time(text, kind: str, safe: bool, where: tuple[int | None, int], *, foldable: bool = False):
    """Spark's CAST(text AS DATE | TIMESTAMP), field by field with make_date/make_timestamp (DuckDB's own
    cast reads other texts: it refuses '2021', Spark reads it as 2021-01-01, and reads 'infinity'). A text
    that is ``foldable`` (no column in it) may be one of Spark's special values ('today'); a literal's is
    read here, and one with a time zone ('today Europe/Berlin') is refused."""
    from sqlglot import exp

    if isinstance(text, exp.Literal) and text.is_string and re.match(_YEAR_BEFORE_ONE, text.this):
        raise Refusal(f"{_YEAR_BEFORE_ONE_REFUSED}: {text.this!r}", *where)
    if foldable and isinstance(text, exp.Literal) and text.is_string:
        special = special_datetime(text.this)
        if special is not None and special[1]:
            raise Refusal(
                f"the python engine cannot read Spark's special {kind} value {text.this!r} with a time zone; "
                f"write it without one ('{special[0]}' is in UTC)",
                *where,
            )
        if special is not None:
            return special_datetime_value(special[0], kind)
        if (
            kind == "TIMESTAMP"
            and _ZONED_TIME_TEXT.fullmatch(text.this)
            and not re.fullmatch(_SPARK_TIME_TEXT, text.this, re.ASCII)
        ):
            raise Refusal(
                f"the python engine cannot read the time zone in {text.this!r} as Spark does (cep's times are "
                "UTC); write the time in UTC without a zone",
                *where,
            )
    pattern = _SPARK_DATE_TEXT if kind == "DATE" else _SPARK_TIME_TEXT

    def field(group: int, default: int):
        found = call_duck("regexp_extract", text.copy(), exp.Literal.string(pattern), exp.Literal.number(group))
        return exp.Coalesce(
            this=exp.TryCast(this=found, to=exp.DataType.build("INT"), safe=True),
            expressions=[exp.Literal.number(default)],
        )

    if kind == "DATE":
        made = call_duck("try", call_duck("make_date", field(1, 1), field(2, 1), field(3, 1)))
    else:
        fraction = call_duck(
            "rpad",
            call_duck("regexp_extract", text.copy(), exp.Literal.string(pattern), exp.Literal.number(7)),
            exp.Literal.number(6),
            exp.Literal.string("0"),
        )
        micros = exp.Coalesce(
            this=exp.TryCast(this=fraction, to=exp.DataType.build("BIGINT"), safe=True),
            expressions=[exp.Literal.number(0)],
        )
        # DuckDB's make_timestamp carries hour 24 and minute or second 60 over; Spark's reading refuses them.
        clock = exp.and_(
            *(
                exp.LT(this=field(group, 0), expression=exp.Literal.number(top))
                for group, top in ((4, 24), (5, 60), (6, 60))
            )
        )
        moment = call_duck(
            "try",
            call_duck("make_timestamp", field(1, 1), field(2, 1), field(3, 1), field(4, 0), field(5, 0), field(6, 0)),
        )
        made = exp.Case(
            ifs=[exp.If(this=clock, true=exp.Add(this=moment, expression=call_duck("to_microseconds", micros)))]
        )
    # A text of the right shape whose date does not exist (2021-02-30) is an error too (TRY_CAST: NULL).
    readable = exp.and_(
        call_duck("regexp_full_match", text.copy(), exp.Literal.string(pattern)),
        exp.Not(this=exp.Is(this=made.copy(), expression=exp.Null())),
    )
    invalid = exp.Null() if safe else fail_with(f"the text cannot be cast to {kind}", where, kind)
    specials = _special_datetime_branches(text, kind, where) if foldable and not isinstance(text, exp.Literal) else []
    before_year_one = call_duck("regexp_matches", text.copy(), exp.Literal.string(_YEAR_BEFORE_ONE))
    refused = fail_with(_YEAR_BEFORE_ONE_REFUSED, where, kind, spark_fails=False)
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=text.copy(), expression=exp.Null()), true=exp.Null()),
            *specials,
            exp.If(this=before_year_one, true=refused),  # TRY_CAST too: Spark reads it
            exp.If(this=readable, true=made),
        ],
        default=invalid,
    )


def implicit_time_casts(node, types: dict[int, str]) -> None:
    """Text given to a function of Spark's that takes a DATE (``year``, ``date_add``, ``trunc``...) or a
    TIMESTAMP (``hour``, ``date_format``...), cast as Spark's analyser casts it (its CAST: '2021' is
    2021-01-01, a computed 'today' its special value, 'abc' an error at the call), in place. sqlglot's DuckDB
    form casts with DuckDB's own cast, which refuses '2021' and reads 'infinity'."""
    from sqlglot import exp

    for key, kind in _time_operands(node):
        operand = node.args.get(key)
        if operand is None or type_of(operand, types) not in TEXT_TYPES:
            continue
        if isinstance(node, (exp.UnixDate, exp.UnixSeconds, exp.UnixMillis)):  # no implicit cast in Spark's
            raise Refusal(
                f"{type(node).__name__.upper().replace('UNIX', 'UNIX_')}() takes a {kind}, not text (Spark casts "
                f"no text here): CAST(text AS {kind})",
                *place_of(node),
                spark_too=True,
            )
        node.set(key, text_to_time(operand.copy(), kind, False, place_of(operand), foldable=foldable(operand)))


def time_operand_keys(node) -> tuple[str, ...]:
    """The keys of ``node``'s operands that Spark casts from text to a DATE or TIMESTAMP (for their types)."""
    return tuple(key for key, _ in _time_operands(node))


def _time_operands(node) -> tuple[tuple[str, str], ...]:
    from sqlglot import exp

    if isinstance(node, exp.TsOrDsToDate) and node.args.get("format") is None:  # year(s), dayofweek(s), datediff
        return (("this", "DATE"),)
    if isinstance(node, (exp.Quarter, exp.LastDay, exp.TsOrDsAdd, exp.AddMonths, exp.NextDay, exp.UnixDate)):
        return (("this", "DATE"),)
    if isinstance(node, (exp.Hour, exp.Minute, exp.Second, exp.UnixSeconds, exp.UnixMillis, exp.TimestampAdd)):
        return (("this", "TIMESTAMP"),)
    if isinstance(node, exp.TimestampDiff):
        return (("this", "TIMESTAMP"), ("expression", "TIMESTAMP"))
    if isinstance(node, exp.Extract) and not isinstance(node.expression, exp.Binary):
        # Spark's EXTRACT is its year(), hour()...: a clock field takes a TIMESTAMP. Arithmetic may be an
        # INTERVAL (a DATE minus text), whose fields EXTRACT reads as they are.
        return (("expression", "TIMESTAMP" if node.name.upper() in _CLOCK_FIELDS else "DATE"),)
    return ()


# Spark's EXTRACT fields (with their other spellings) whose function takes a TIMESTAMP; every other takes a DATE.
_CLOCK_FIELDS = frozenset("HOUR H HOURS HR HRS MINUTE M MIN MINS MINUTES SECOND S SEC SECONDS SECS".split())


# The text Spark's cast reads as a DOUBLE or FLOAT, once trimmed: Java's decimal notation with an optional
# d/f suffix (1.5d), and NaN and infinities in any case; as a DECIMAL, the decimal notation alone. DuckDB's
# own cast reads other texts too (1_000), and refuses the suffix.
_SPARK_FLOATING_TEXT = r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?|(?i:nan|inf|infinity))"
_SPARK_DECIMAL_TEXT = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"


def text_to_fraction(text, to, target: str, safe: bool, where: tuple[int | None, int]):
    """Spark's CAST(text AS DOUBLE | FLOAT | DECIMAL): the texts Spark reads, the others an error at the
    cast (TRY_CAST: NULL), not DuckDB's "Could not convert string", which names neither."""
    from sqlglot import exp

    trimmed = java_trimmed(text)
    syntax = _SPARK_DECIMAL_TEXT if target == "DECIMAL" else _SPARK_FLOATING_TEXT
    unsuffixed = call_duck(
        "regexp_replace", trimmed.copy(), exp.Literal.string("([0-9.])[fFdD]$"), exp.Literal.string("\\1")
    )
    tried = exp.TryCast(this=unsuffixed, to=to.copy(), safe=True)
    if target == "DECIMAL" and len(to.expressions) == 2:
        # Through 38 digits first: DuckDB reads no exponent into a DECIMAL without integer digits ('6.23E-13'
        # as a DECIMAL(15,15) is NULL), which Spark reads; the second cast is exact or overflows, as Spark's.
        widest = exp.DataType.build(f"DECIMAL(38, {to.expressions[1].name})")
        tried.set("this", exp.TryCast(this=unsuffixed.copy(), to=widest, safe=True))
    readable = exp.and_(
        call_duck("regexp_full_match", trimmed, exp.Literal.string(syntax)),
        exp.Not(this=exp.Is(this=tried.copy(), expression=exp.Null())),
    )
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=text.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=readable, true=tried),
        ],
        default=exp.Null() if safe else fail_with(f"the text cannot be cast to {target}", where, to),
    )


# The words Spark's cast reads as TRUE and FALSE, after trimming spaces and control characters and lower-casing
# (DuckDB's own cast reads neither ' true ' nor 'n').
_SPARK_TRUE = ("t", "true", "y", "yes", "1")
_SPARK_FALSE = ("f", "false", "n", "no", "0")


def text_to_boolean(text, safe: bool, where: tuple[int | None, int]):
    from sqlglot import exp

    trimmed = call_duck("lower", java_trimmed(text))

    def among(words):
        return exp.In(this=trimmed.copy(), expressions=[exp.Literal.string(word) for word in words])

    invalid = exp.Null() if safe else fail_with("the text cannot be cast to BOOLEAN", where, "BOOLEAN")
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=text.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=among(_SPARK_TRUE), true=exp.true()),
            exp.If(this=among(_SPARK_FALSE), true=exp.false()),
        ],
        default=invalid,
    )

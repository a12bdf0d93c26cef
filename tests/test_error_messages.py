"""Golden tests for what users read: the rendered text (``str(err)``) of each error code.

Each case is the query, and the exact text of the error: ``file:line:col: error[CODE]: message``,
the source line, a caret underline, and a hint when there is one. Changing a message is fine,
but it should be a deliberate change of this file.
"""

from __future__ import annotations

import pytest

from cep.grammar.checks import check
from cep.grammar.errors import CepError, CepSemanticError
from cep.grammar.parser import parse, parse_schema

SCHEMA = {"ts": "TIMESTAMP", "symbol": "VARCHAR", "price": "DOUBLE", "tags": "ARRAY<VARCHAR>"}

# (code, query, check with SCHEMA?, expected str(err))
GOLDEN = [
    (
        "E0101",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x < < 1)",
        False,
        "q.sql:1:62: error[E0101]: expected an expression in DEFINE, found '<'\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x < < 1)\n"
        "     |                                                              ^",
    ),
    (
        "E0102",
        "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO FIRST",
        False,
        "q.sql:1:59: error[E0102]: unexpected end of query; expected a name\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO FIRST\n"
        "     |                                                           ^\n"
        "  hint: the '(' at line 1, column 33 is never closed",
    ),
    (
        "E0103",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x # 1)",
        False,
        "q.sql:1:60: error[E0103]: unexpected character '#'\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x # 1)\n"
        "     |                                                            ^",
    ),
    (
        "E0104",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x = 'abc)",
        False,
        "q.sql:1:62: error[E0104]: unterminated string: the closing ' is missing\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x = 'abc)\n"
        "     |                                                              ^^^^^\n"
        "  hint: a quote inside a string is written twice: 'it''s'",
    ),
    (
        "E0105",
        'SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS "abc > 1)',
        False,
        'q.sql:1:58: error[E0105]: unterminated quoted name: the closing " is missing\n'
        '   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS "abc > 1)\n'
        "     |                                                          ^^^^^^^^^",
    ),
    (
        "E0106",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) /* not closed",
        False,
        "q.sql:1:47: error[E0106]: unterminated comment: the closing */ is missing\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) /* not closed\n"
        "     |                                               ^^",
    ),
    (
        "E0107",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x IN (SELECT 1))",
        False,
        "q.sql:1:63: error[E0107]: subqueries are not supported\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x IN (SELECT 1))\n"
        "     |                                                               ^^^^^^^^^^\n"
        "  hint: a whole statement with subqueries runs with cep.sql(spark, text), cep.compile_sql(text).run(tables) "
        "or `cep run`",
    ),
    (
        "E0108",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS ts > DATE '2024-13-01')",
        False,
        "q.sql:1:63: error[E0108]: '2024-13-01' is not a date\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS ts > DATE '2024-13-01')\n"
        "     |                                                               ^^^^^^^^^^^^^^^^^\n"
        "  hint: write YYYY-MM-DD",
    ),
    (
        "E0109",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) WITHIN INTERVAL '2' MONTHS)",
        False,
        "q.sql:1:78: error[E0109]: unknown interval unit 'MONTHS'\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) WITHIN INTERVAL '2' MONTHS)\n"
        "     |                                                                              ^^^^^^\n"
        "  hint: use WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND or MICROSECOND (or their plurals): months and "
        "years have no fixed length",
    ),
    (
        "E0110",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A{3,2}))",
        False,
        "q.sql:1:44: error[E0110]: quantifier {3,2} has a minimum larger than its maximum\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A{3,2}))\n"
        "     |                                            ^^^^^",
    ),
    (
        "E0111",
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES PREV(x, 1, 2) AS p PATTERN (A))",
        False,
        "q.sql:1:43: error[E0111]: PREV() takes a value and an optional offset, e.g. PREV(A.price, 2)\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (MEASURES PREV(x, 1, 2) AS p PATTERN (A))\n"
        "     |                                           ^^^^^^^^^^^^^",
    ),
    (
        "E0112",
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES lower(DISTINCT x) AS l PATTERN (A))",
        False,
        "q.sql:1:43: error[E0112]: DISTINCT is only allowed in aggregate calls, not in LOWER()\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (MEASURES lower(DISTINCT x) AS l PATTERN (A))\n"
        "     |                                           ^^^^^^^^^^^^^^^^^",
    ),
    (
        "E0113",
        'SELECT * FROM t MATCH_RECOGNIZE (PATTERN ("") DEFINE A AS true)',
        False,
        "q.sql:1:43: error[E0113]: a quoted name cannot be empty\n"
        '   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN ("") DEFINE A AS true)\n'
        "     |                                           ^^",
    ),
    (
        "E0114",
        "  -- nothing but a comment\n",
        False,
        "q.sql:1:1: error[E0114]: the query is empty\n   1 |   -- nothing but a comment\n     | ^",
    ),
    (
        "E0116",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A));\nSELECT * FROM u MATCH_RECOGNIZE (PATTERN (B))",
        False,
        "q.sql:2:1: error[E0116]: only one statement is expected here, but another follows the ';'\n"
        "   2 | SELECT * FROM u MATCH_RECOGNIZE (PATTERN (B))\n"
        "     | ^^^^^^\n"
        "  hint: use parse_all() for a file",
    ),
    (
        "E0120",
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY ts\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS A.x > 1\n"
        "         B AS B.x < 1\n"
        ") AS m",
        False,
        "q.sql:5:10: error[E0120]: missing ',' between DEFINE items\n"
        "   5 |          B AS B.x < 1\n"
        "     |          ^\n"
        "  hint: separate the conditions with commas: `A AS ..., B AS ...`",
    ),
    (
        "E0121",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  DEFINE A = A.x > 1\n) AS m",
        False,
        "q.sql:4:12: error[E0121]: expected AS after the variable name in DEFINE, found '='\n"
        "   4 |   DEFINE A = A.x > 1\n"
        "     |            ^\n"
        "  hint: write `A AS A.price > 10`",
    ),
    (
        "E0122",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  WITHIN INTERVAL '1' HOUR\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:3: error[E0122]: WITHIN must come after PATTERN (...)\n"
        "   3 |   WITHIN INTERVAL '1' HOUR\n"
        "     |   ^^^^^^\n"
        "  hint: write PATTERN (...) WITHIN INTERVAL '10' MINUTE",
    ),
    (
        "E0123",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES A.x AS x\n  DEFINE A AS true\n) AS m",
        False,
        "q.sql:4:3: error[E0123]: missing PATTERN (...) before DEFINE\n"
        "   4 |   DEFINE A AS true\n"
        "     |   ^^^^^^\n"
        "  hint: every MATCH_RECOGNIZE needs a PATTERN clause",
    ),
    (
        "E0124",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B+\n  DEFINE B AS B.x < PREV(B.x)\n) AS m",
        False,
        "q.sql:4:3: error[E0124]: expected ')' after the pattern, found 'DEFINE'\n"
        "   4 |   DEFINE B AS B.x < PREV(B.x)\n"
        "     |   ^^^^^^\n"
        "  hint: the '(' at line 3, column 11 is never closed",
    ),
    (
        "E0125",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  ALL ROW PER MATCH\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:7: error[E0125]: write ALL ROWS PER MATCH (ROWS, plural)\n"
        "   3 |   ALL ROW PER MATCH\n"
        "     |       ^^^\n"
        "  hint: the clause is ALL ROWS PER MATCH",
    ),
    (
        "E0126",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  MEASURES A.x AS x\n) AS m",
        False,
        "q.sql:4:3: error[E0126]: MEASURES must come before PATTERN\n"
        "   4 |   MEASURES A.x AS x\n"
        "     |   ^^^^^^^^\n"
        "  hint: the order is PARTITION BY, ORDER BY, MEASURES, rows per match, AFTER MATCH SKIP, PATTERN, WITHIN, "
        "SUBSET, DEFINE",
    ),
    (
        "E0201",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts PATTERN (A))",
        True,
        "q.sql:1:47: error[E0201]: PARTITION BY column 'sym' is not in the input\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts PATTERN (A))\n"
        "     |                                               ^^^\n"
        "  hint: did you mean 'symbol'?",
    ),
    (
        "E0202",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  DEFINE C AS C.price > 10\n) AS m",
        False,
        "q.sql:4:10: error[E0202]: DEFINE gives a condition for 'C', which does not appear in PATTERN\n"
        "   4 |   DEFINE C AS C.price > 10\n"
        "     |          ^\n"
        "  hint: the pattern's variables are A, B",
    ),
    (
        "E0203",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  DEFINE B AS true, B AS false\n) AS m",
        False,
        "q.sql:4:21: error[E0203]: pattern variable 'B' is defined twice\n"
        "   4 |   DEFINE B AS true, B AS false\n"
        "     |                     ^",
    ),
    (
        "E0204",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  SUBSET U = (A, X)\n) AS m",
        False,
        "q.sql:4:18: error[E0204]: subset 'U' names 'X', which is not a pattern variable\n"
        "   4 |   SUBSET U = (A, X)\n"
        "     |                  ^\n"
        "  hint: the pattern's variables are A, B",
    ),
    (
        "E0205",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  SUBSET A = (B)\n) AS m",
        False,
        "q.sql:4:10: error[E0205]: subset name 'A' is already a pattern variable\n"
        "   4 |   SUBSET A = (B)\n"
        "     |          ^",
    ),
    (
        "E0206",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES C.price AS p\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:12: error[E0206]: pattern variable 'C' is used in MEASURES but never appears in PATTERN\n"
        "   3 |   MEASURES C.price AS p\n"
        "     |            ^\n"
        "  hint: the pattern's variables are A, B",
    ),
    (
        "E0207",
        "SELECT q.x FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m",
        False,
        "q.sql:1:8: error[E0207]: 'q' is not known in SELECT; qualify columns with the MATCH_RECOGNIZE alias 'm'\n"
        "   1 | SELECT q.x FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m\n"
        "     |        ^",
    ),
    (
        "E0208",
        "SELECT m.x FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m WHERE CLASSIFIER() = 'A'",
        False,
        "q.sql:1:78: error[E0208]: CLASSIFIER() can only be used inside MATCH_RECOGNIZE, not in WHERE\n"
        "   1 | SELECT m.x FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m WHERE CLASSIFIER() = 'A'\n"
        "     |                                                                              ^^^^^^^^^^^^\n"
        "  hint: compute it as a measure and select the measure",
    ),
    (
        "E0210",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES PREV(PREV(A.x)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:17: error[E0210]: PREV() cannot be nested inside PREV()\n"
        "   3 |   MEASURES PREV(PREV(A.x)) AS p\n"
        "     |                 ^^^^^^^^^",
    ),
    (
        "E0211",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES LAST(SUM(A.x)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:17: error[E0211]: an aggregate cannot be used inside LAST()\n"
        "   3 |   MEASURES LAST(SUM(A.x)) AS p\n"
        "     |                 ^^^^^^^^",
    ),
    (
        "E0212",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES LAST(A.x - B.x) AS p\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:12: error[E0212]: the argument of LAST() must refer to one pattern variable, but it refers to A, B\n"
        "   3 |   MEASURES LAST(A.x - B.x) AS p\n"
        "     |            ^^^^^^^^^^^^^^^",
    ),
    (
        "E0213",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES PREV(A.x, -1) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:22: error[E0213]: the offset of PREV() must be a non-negative integer constant\n"
        "   3 |   MEASURES PREV(A.x, -1) AS p\n"
        "     |                      ^^\n"
        "  hint: write e.g. PREV(A.price, 2)",
    ),
    (
        "E0214",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  DEFINE A AS FINAL LAST(A.x) > 0\n) AS m",
        False,
        "q.sql:4:15: error[E0214]: FINAL cannot be used in DEFINE\n"
        "   4 |   DEFINE A AS FINAL LAST(A.x) > 0\n"
        "     |               ^^^^^^^^^^^^^^^\n"
        "  hint: DEFINE conditions only see the rows matched so far",
    ),
    (
        "E0215",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES MAX(COUNT(*)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:16: error[E0215]: aggregates cannot be nested: COUNT() inside MAX()\n"
        "   3 |   MEASURES MAX(COUNT(*)) AS p\n"
        "     |                ^^^^^^^^",
    ),
    (
        "E0216",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES FIRST(NEXT(A.x)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:18: error[E0216]: NEXT() cannot be nested inside FIRST()\n"
        "   3 |   MEASURES FIRST(NEXT(A.x)) AS p\n"
        "     |                  ^^^^^^^^^\n"
        "  hint: write it the other way round: NEXT(FIRST(...))",
    ),
    (
        "E0217",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES PREV(1 + LAST(A.x)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:21: error[E0217]: LAST() inside PREV() must be its whole first argument\n"
        "   3 |   MEASURES PREV(1 + LAST(A.x)) AS p\n"
        "     |                     ^^^^^^^^^\n"
        "  hint: write e.g. PREV(LAST(A.price), 1)",
    ),
    (
        "E0218",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES AVG(PREV(A.x)) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:16: error[E0218]: PREV() cannot be used inside the aggregate AVG()\n"
        "   3 |   MEASURES AVG(PREV(A.x)) AS p\n"
        "     |                ^^^^^^^^^\n"
        "  hint: aggregate the column directly, e.g. SUM(A.price)",
    ),
    (
        "E0220",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  DEFINE A AS A.pricee > 10\n) AS m",
        True,
        "q.sql:4:17: error[E0220]: unknown column 'pricee'\n"
        "   4 |   DEFINE A AS A.pricee > 10\n"
        "     |                 ^^^^^^\n"
        "  hint: did you mean 'price'?",
    ),
    (
        "E0221",
        "SELECT m.y FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m",
        False,
        "q.sql:1:8: error[E0221]: 'y' is not an output column of MATCH_RECOGNIZE\n"
        "   1 | SELECT m.y FROM t MATCH_RECOGNIZE (MEASURES A.x AS x PATTERN (A)) AS m\n"
        "     |        ^^^",
    ),
    (
        "E0222",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES RUNNING PREV(A.x) AS p\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:12: error[E0222]: RUNNING applies only to FIRST, LAST and aggregates, not to PREV()\n"
        "   3 |   MEASURES RUNNING PREV(A.x) AS p\n"
        "     |            ^^^^^^^^^^^^^^^^^",
    ),
    (
        "E0223",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  AFTER MATCH SKIP TO FIRST D\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:29: error[E0223]: AFTER MATCH SKIP TO 'D': no such pattern variable or subset\n"
        "   3 |   AFTER MATCH SKIP TO FIRST D\n"
        "     |                             ^\n"
        "  hint: the pattern's variables are A, B",
    ),
    (
        "E0224",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (!B A)\n  WITHIN INTERVAL '1' HOUR\n) AS m",
        False,
        "q.sql:3:12: error[E0224]: absence !B cannot start the pattern\n"
        "   3 |   PATTERN (!B A)\n"
        "     |            ^^\n"
        "  hint: an absence needs a row before it to start waiting from",
    ),
    (
        "E0225",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A !B)\n) AS m",
        False,
        "q.sql:3:14: error[E0225]: absence !B at the end of the pattern needs WITHIN\n"
        "   3 |   PATTERN (A !B)\n"
        "     |              ^^\n"
        "  hint: add WITHIN INTERVAL '...' to say how long B must stay absent",
    ),
    (
        "E0226",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A (!B)+ C)\n) AS m",
        False,
        "q.sql:3:15: error[E0226]: absence !B cannot be inside a quantifier, alternation, PERMUTE or exclusion\n"
        "   3 |   PATTERN (A (!B)+ C)\n"
        "     |               ^^\n"
        "  hint: write it as a term of the main sequence: A !B C",
    ),
    (
        "E0227",
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY ts\n"
        "  ONE ROW PER MATCH SHOW TIMEOUT MATCHES\n"
        "  PATTERN (A B)\n"
        ") AS m",
        False,
        "q.sql:3:3: error[E0227]: SHOW TIMEOUT MATCHES needs a WITHIN clause\n"
        "   3 |   ONE ROW PER MATCH SHOW TIMEOUT MATCHES\n"
        "     |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  hint: a match can only time out when WITHIN gives it a deadline",
    ),
    (
        "E0228",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES MATCH_STATUS() AS s\n  PATTERN (A B)\n) AS m",
        False,
        "q.sql:3:12: error[E0228]: MATCH_STATUS() needs ONE ROW PER MATCH SHOW TIMEOUT MATCHES "
        "or an absence (!B) in the pattern\n"
        "   3 |   MEASURES MATCH_STATUS() AS s\n"
        "     |            ^^^^^^^^^^^^^^\n"
        "  hint: without them every match has status 'MATCHED'",
    ),
    (
        "E0229",
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY ts\n"
        "  PATTERN (A !B C)\n"
        "  DEFINE C AS MATCH_STATUS() = 'MATCHED'\n"
        ") AS m",
        False,
        "q.sql:4:15: error[E0229]: MATCH_STATUS() cannot be used in DEFINE\n"
        "   4 |   DEFINE C AS MATCH_STATUS() = 'MATCHED'\n"
        "     |               ^^^^^^^^^^^^^^",
    ),
    (
        "E0230",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES lowr(A.s) AS l\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:12: error[E0230]: unknown function LOWR()\n"
        "   3 |   MEASURES lowr(A.s) AS l\n"
        "     |            ^^^^^^^^^\n"
        "  hint: did you mean LOWER()?",
    ),
    (
        "E0231",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  DEFINE A AS PROCTIME() > 0\n) AS m",
        False,
        "q.sql:4:15: error[E0231]: PROCTIME() is only allowed as an ORDER BY key of MATCH_RECOGNIZE\n"
        "   4 |   DEFINE A AS PROCTIME() > 0\n"
        "     |               ^^^^^^^^^^",
    ),
    (
        "E0232",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES SUM(*) AS s\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:16: error[E0232]: '*' is only allowed in COUNT(*) and SELECT *\n"
        "   3 |   MEASURES SUM(*) AS s\n"
        "     |                ^",
    ),
    (
        "E0233",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES SUM() AS s\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:12: error[E0233]: SUM() needs an argument\n   3 |   MEASURES SUM() AS s\n     |            ^^^^^",
    ),
    (
        "E0234",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  DEFINE A AS symbol < price\n) AS m",
        True,
        "q.sql:4:15: error[E0234]: cannot compare text with a number\n"
        "   4 |   DEFINE A AS symbol < price\n"
        "     |               ^^^^^^^^^^^^^^\n"
        "  hint: CAST one side to the other's type",
    ),
    (
        "E0235",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  DEFINE A AS symbol + 1 > 0\n) AS m",
        True,
        "q.sql:4:15: error[E0235]: cannot apply '+' to text and a number\n"
        "   4 |   DEFINE A AS symbol + 1 > 0\n"
        "     |               ^^^^^^^^^^",
    ),
    (
        "E0236",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY tags PATTERN (A))",
        True,
        "q.sql:1:43: error[E0236]: cannot order by 'tags' of type ARRAY<VARCHAR>\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (ORDER BY tags PATTERN (A))\n"
        "     |                                           ^^^^\n"
        "  hint: order by a time, number or text column",
    ),
    (
        "E0237",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES A.x AS v, A.y AS v\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:29: error[E0237]: measure 'v' is defined twice\n"
        "   3 |   MEASURES A.x AS v, A.y AS v\n"
        "     |                             ^",
    ),
    (
        "E0238",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  WITHIN INTERVAL '0' SECOND\n) AS m",
        False,
        "q.sql:4:10: error[E0238]: the WITHIN interval must be longer than zero\n"
        "   4 |   WITHIN INTERVAL '0' SECOND\n"
        "     |          ^^^^^^^^^^^^^^^^^^^",
    ),
    (
        "E0239",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY t.symbol PATTERN (A))",
        False,
        "q.sql:1:47: error[E0239]: PARTITION BY columns are input columns and take no qualifier\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY t.symbol PATTERN (A))\n"
        "     |                                               ^",
    ),
    (
        "E0240",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) WITHIN INTERVAL '1' MINUTE)",
        False,
        "q.sql:1:55: error[E0240]: WITHIN needs an ORDER BY column holding the event time\n"
        "   1 | SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) WITHIN INTERVAL '1' MINUTE)\n"
        "     |                                                       ^^^^^^^^^^^^^^^^^^^",
    ),
    (
        "E0242",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES CAST(A.x AS money) AS c\n  PATTERN (A)\n) AS m",
        False,
        "q.sql:3:24: error[E0242]: unknown type 'MONEY' in CAST\n"
        "   3 |   MEASURES CAST(A.x AS money) AS c\n"
        "     |                        ^^^^^",
    ),
    (
        "E0303",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A{20000})\n) AS m",
        False,
        "q.sql:3:12: error[E0303]: quantifier {20000} exceeds the largest allowed bound, 500\n"
        "   3 |   PATTERN (A{20000})\n"
        "     |            ^^^^^^^^\n"
        "  hint: use + or * for long runs of rows",
    ),
    (
        "E0304",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (PERMUTE(A, B, C, D, E, F, G, H))\n) AS m",
        False,
        "q.sql:3:12: error[E0304]: PERMUTE has 8 items; the limit is 6 (it expands to every order: 8! alternatives)\n"
        "   3 |   PATTERN (PERMUTE(A, B, C, D, E, F, G, H))\n"
        "     |            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    (
        "E0306",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN ((A{500} B{500}){20})\n) AS m",
        False,
        "q.sql:3:12: error[E0306]: the pattern expands to more than 2000 terms "
        "once quantifier bounds and PERMUTE are unrolled\n"
        "   3 |   PATTERN ((A{500} B{500}){20})\n"
        "     |            ^^^^^^^^^^^^^^^^^^^",
    ),
    (
        # After `PREV(x)`, WITHIN reads as the start of `f(x) WITHIN GROUP (...)`: the same clause-order
        # mistake as WITHIN after any other condition (not "expected 'GROUP'"), at the word WITHIN.
        "E0126",
        "SELECT * FROM t MATCH_RECOGNIZE (\n  PATTERN (A B)\n  DEFINE B AS x < PREV(x) WITHIN INTERVAL '5' MINUTE\n)",
        False,
        "q.sql:3:27: error[E0126]: WITHIN must come before DEFINE\n"
        "   3 |   DEFINE B AS x < PREV(x) WITHIN INTERVAL '5' MINUTE\n"
        "     |                           ^^^^^^\n"
        "  hint: the order is PARTITION BY, ORDER BY, MEASURES, rows per match, AFTER MATCH SKIP, PATTERN, "
        "WITHIN, SUBSET, DEFINE",
    ),
]


@pytest.mark.parametrize("code, query, with_schema, expected", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_rendered_error(code: str, query: str, with_schema: bool, expected: str) -> None:
    with pytest.raises(CepError) as raised:
        check(parse(query, filename="q.sql"), schema=SCHEMA if with_schema else None, source=query, filename="q.sql")
    assert raised.value.code == code
    assert str(raised.value) == expected


def test_golden_cases_cover_many_codes() -> None:
    assert len({g[0] for g in GOLDEN}) >= 30


def test_schema_error() -> None:
    with pytest.raises(CepError) as raised:
        parse_schema("ts TIMESTAMP, price MONEY")
    assert str(raised.value) == (
        "schema:1:15: error[E0115]: invalid schema: unknown type 'MONEY'\n"
        "   1 | ts TIMESTAMP, price MONEY\n"
        "     |               ^^^^^^^^^^^\n"
        "  hint: write columns as 'name TYPE, ...', e.g. 'ts TIMESTAMP, symbol STRING, price DOUBLE'"
    )


def test_limit_errors_name_the_limit() -> None:
    deep = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS " + "(" * 201 + "1" + ")" * 201 + ")"
    with pytest.raises(CepSemanticError) as raised:
        parse(deep, filename="q.sql")
    assert str(raised.value).splitlines()[0] == (
        "q.sql:1:257: error[E0302]: parentheses nest deeper than the limit of 200 levels"
    )
    long_chain = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS " + " + ".join(["x"] * 300) + " > 0)"
    with pytest.raises(CepSemanticError) as raised:
        parse(long_chain, filename="q.sql")
    assert raised.value.code == "E0302"
    assert raised.value.message == "expressions and patterns may nest at most 200 levels deep"
    with pytest.raises(CepSemanticError) as raised:
        parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))" + " " * (256 * 1024), filename="q.sql")
    assert str(raised.value) == "q.sql: error[E0301]: the query is 262189 characters long; the limit is 262144"
    many = " ".join(f"V{i}" for i in range(101))
    with pytest.raises(CepSemanticError) as raised:
        parse(f"SELECT * FROM t MATCH_RECOGNIZE (PATTERN ({many}))", filename="q.sql")
    assert str(raised.value).splitlines()[0] == (
        "q.sql:1:43: error[E0305]: the pattern has 101 variables; the limit is 100"
    )


def test_several_problems_render_one_after_the_other() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (\n  PATTERN (A)\n  DEFINE B AS true, A AS FINAL LAST(A.x) > 0\n)"
    with pytest.raises(CepSemanticError) as raised:
        parse(query, filename="q.sql")
    assert str(raised.value) == (
        "q.sql:3:10: error[E0202]: DEFINE gives a condition for 'B', which does not appear in PATTERN\n"
        "   3 |   DEFINE B AS true, A AS FINAL LAST(A.x) > 0\n"
        "     |          ^\n"
        "  hint: the pattern's variables are A\n"
        "q.sql:3:26: error[E0214]: FINAL cannot be used in DEFINE\n"
        "   3 |   DEFINE B AS true, A AS FINAL LAST(A.x) > 0\n"
        "     |                          ^^^^^^^^^^^^^^^\n"
        "  hint: DEFINE conditions only see the rows matched so far"
    )


def test_lark_never_shows_through() -> None:
    """No Lark wording, terminal names or chained Lark exceptions in what users see."""
    for query in [
        "SELECT",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B C",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x x)",
    ]:
        with pytest.raises(CepError) as raised:
            parse(query)
        text = str(raised.value)
        for lark_word in ("Token(", "Expected one of", "_RPAR", "IDENT", "$END", "Unexpected token"):
            assert lark_word not in text
        assert raised.value.__cause__ is None and raised.value.__suppress_context__


def refusal(query: str, schema: dict[str, str]) -> CepError:
    """The error ``query`` gets, checked against ``schema``."""
    with pytest.raises(CepError) as raised:
        check(parse(query, filename="q.sql"), schema=schema, source=query, filename="q.sql")
    return raised.value


def test_an_unknown_column_with_no_close_spelling_lists_the_input_s_columns() -> None:
    """A guessed name (`cost` for `price`, `tstamp` for `ts`) has no close spelling: the hint says what the
    input has, in its order, instead of leaving the analyst to open the file."""
    query = "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY tstamp\n  PATTERN (A)\n  DEFINE A AS A.cost > 10\n)"
    error = refusal(query, SCHEMA)
    assert str(error) == (
        "q.sql:2:12: error[E0201]: ORDER BY column 'tstamp' is not in the input\n"
        "   2 |   ORDER BY tstamp\n"
        "     |            ^^^^^^\n"
        "  hint: the input's columns are ts, symbol, price, tags\n"
        "q.sql:4:17: error[E0220]: unknown column 'cost'\n"
        "   4 |   DEFINE A AS A.cost > 10\n"
        "     |                 ^^^^\n"
        "  hint: the input's columns are ts, symbol, price, tags"
    )


def test_the_list_of_columns_in_a_hint_stops_at_a_dozen() -> None:
    wide = {"ts": "TIMESTAMP", **{f"c{i}": "DOUBLE" for i in range(19)}}  # 20 columns
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS zzz > 1)"
    error = refusal(query, wide)
    assert str(error).endswith(
        "  hint: the input's columns are ts, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 and 8 more"
    )


def test_an_unknown_variable_with_no_close_spelling_lists_the_pattern_s_variables_and_subsets() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES LAST(X.price) AS p PATTERN (A B) SUBSET U = (A, B))"
    error = refusal(query, SCHEMA)
    assert error.code == "E0206"
    assert str(error).endswith("  hint: the pattern's variables and subsets are A, B, U")


def test_a_double_quoted_word_that_is_no_column_is_told_to_use_single_quotes() -> None:
    """`status = "fail"` (text in double quotes, as MySQL allows) names a column in SQL; no column is close to
    'fail', so the hint is about the quotes, not a list of columns."""
    query = 'SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS symbol = "ACME")'
    error = refusal(query, SCHEMA)
    assert error.code == "E0220"
    assert str(error).endswith(
        "  hint: double quotes name a column (as in the SQL standard); write text in single quotes: 'ACME'"
    )


@pytest.mark.parametrize(
    ("around", "part", "column"),
    [(" WHERE", "'WHERE'", 76), (" WHERE v >", "'>'", 84)],
)
def test_sql_around_that_stops_short_says_what_is_incomplete_in_plain_words(
    around, part, column, tmp_path, capsys
) -> None:
    # sqlglot's own words were "Required keyword: 'this' missing for <class 'sqlglot.expressions.query.Where'>".
    from cep.cli import main

    query = tmp_path / "q.sql"
    query.write_text("SELECT v FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS true)" + around + "\n")
    assert main(["check", str(query)]) == 1
    err = capsys.readouterr().err
    where = f"q.sql:1:{column}: error[E0130]: syntax error in the SQL around MATCH_RECOGNIZE: "
    assert where + f"{part} is incomplete: something must follow it" in err
    assert "sqlglot" not in err and "class" not in err, err

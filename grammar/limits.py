"""Hard limits on queries, each a named constant with the reason for its value.

Exceeding a limit raises a ``CepSemanticError`` whose code (E03xx) and message name the limit, so a
hostile or generated query fails fast with a clear message instead of hanging or crashing.
"""

from __future__ import annotations

# E0301. Hand-written queries are a few KiB; 256 KiB leaves ample room for generated ones, long
# comments and string constants (which cost almost nothing to skip).
MAX_QUERY_LENGTH = 256 * 1024

# Not an error: the characters of the statements a process keeps parsed (``parser.parse_part``), so that
# loading a rule set again after one of its files changed parses only what changed. A statement's AST
# weighs about 20 times its text, so 16 MB of rules (about 30,000 of the bench's fraud rules, three
# times the 10,000-file rule set the loader is sized for) hold about 300 MB, most of it the rule set
# that is running anyway.
PARSED_STATEMENTS_CHARACTERS = 16 * 1000 * 1000

# E0307. Tokens (words, numbers, strings, operators) in one statement. Parsing costs about 40 µs a
# token in pure Python, so 20,000 tokens parse in under a second; the conformance corpus's longest
# query has about 150.
MAX_QUERY_TOKENS = 20_000

# E0302. Expression and pattern nesting depth (parentheses, operators, calls, quantifiers).
# The checker, formatter and evaluator walk the AST recursively; 200 levels stay far below Python's
# default recursion limit (1000) even at several frames per level, and no readable query nests
# anywhere near this deep. A chain of N binary operators (`a + b + ... `) nests N levels.
MAX_NESTING_DEPTH = 200

# E0303. The largest bound in `{n}`, `{n,}`, `{,m}` or `{n,m}`. The compiler unrolls bounded
# quantifiers into n + (m - n) copies of the body, and each copy can hold a live partial match, so
# the bound multiplies the work per row: at 500 a row costs about half a millisecond in the worst
# case (every copy alive), still linear. Longer runs are what `+` and `*` (with a condition on
# COUNT) are for.
MAX_QUANTIFIER_BOUND = 500

# E0304. PERMUTE(a, b, ...) means all n! orders. The compiler shares their prefixes (a tree of
# sum n!/(n-k)! item occurrences: 1,956 for 6 items), which fits MAX_EXPANDED_PATTERN_TERMS up to 6
# items; 7 would need 13,699.
MAX_PERMUTE_ITEMS = 6

# E0305. Distinct pattern variables in one pattern. Each variable has a DEFINE condition evaluated
# per row and thread; 100 is far beyond real queries (Oracle's documented examples use a handful).
MAX_PATTERN_VARIABLES = 100

# E0306. Pattern size after unrolling bounded quantifiers and expanding PERMUTE, counted in pattern
# terms. Every term of the compiled program can hold a live partial match, and each costs about a
# microsecond per row, so this bounds the worst-case work per row (about 2 ms) whatever the nesting.
MAX_EXPANDED_PATTERN_TERMS = 2_000

# E0115. The most digits a DECIMAL holds: Spark's ``DecimalType.MAX_PRECISION`` (a 128-bit integer holds
# 38 decimal digits), so a schema's DECIMAL(p, s) is what both engines can carry.
MAX_DECIMAL_PRECISION = 38

"""Hard limits on queries, each a named constant with the reason for its value.

Exceeding a limit raises a ``CepSemanticError`` whose code (E03xx) and message name the limit, so a
hostile or generated query fails fast with a clear message instead of hanging or crashing.
"""

from __future__ import annotations

# E0301. Hand-written queries are a few KiB; 256 KiB leaves ample room for generated ones, long
# comments and string constants (which cost almost nothing to skip).
MAX_QUERY_LENGTH = 256 * 1024

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
# quantifiers into n + (m - n) copies of the body, so the bound is a direct multiplier on the
# program size; 10,000 rows per variable is beyond any pattern we have seen in practice.
MAX_QUANTIFIER_BOUND = 10_000

# E0304. PERMUTE(a, b, ...) compiles to an alternation of all n! orders: 7 items give 5,040
# branches, 8 would give 40,320, which is more than any matcher should try per row.
MAX_PERMUTE_ITEMS = 7

# E0305. Distinct pattern variables in one pattern. Each variable has a DEFINE condition evaluated
# per row and thread; 100 is far beyond real queries (Oracle's documented examples use a handful).
MAX_PATTERN_VARIABLES = 100

# E0306. Pattern size after unrolling bounded quantifiers and expanding PERMUTE, counted in pattern
# terms. This bounds the compiled program (and so memory and per-row work) whatever the nesting.
MAX_EXPANDED_PATTERN_TERMS = 100_000

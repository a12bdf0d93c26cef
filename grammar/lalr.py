"""A light driver over Lark's own LALR tables: text in place to AST nodes, without Lark's parse tree.

Lark stays the grammar's single source: the parse table, the terminals and their regular expressions, the
per-state lexers of the contextual lexer and the tree-shaping rules (``?rule``, ``_rule``, ``[optional]``
placeholders, filtered keywords) are all read from the ``Lark`` object built from ``cep.lark``; nothing is
copied by hand. What this module saves is Lark's work per token and per reduction (a chain of wrappers and
a ``Tree`` with its ``Meta`` per node, then a second walk to transform them): one loop lexes, shifts and
reduces, and calls the rule's function of the transformer at each reduction, with the positions Lark's
``propagate_positions`` would give it.

The driver answers only when it is sure: on anything it does not handle as Lark does (a syntax error, text
no terminal matches, a rule without a function) it returns None, and the caller takes Lark's own path, which
also words every error. So an answer, a message or a position never depends on which path ran; the
differential test (tests/test_lalr_driver.py) compares the two over every query of the repository and over
generated ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lark import Lark, Token
from lark.lexer import Scanner, UnlessCallback
from lark.parse_tree_builder import maybe_create_child_filter
from lark.parsers.lalr_analysis import Shift

__all__ = ["Driver"]

# A value on the stack: (kind, value, start, end). kind is TEXT (value: a token's (type, text), made a Token
# only when a function reads it: most are keywords that Lark filters out), NODE
# (value: what the rule's function returned), INLINE (value: the children a ``_rule`` splices into its parent)
# or PENDING (value: (function, children) of a node whose positions are still empty: its function runs once
# they are known, as Lark's transform runs after ``propagate_positions`` has filled them from an enclosing
# rule). start and end are the positions (line, column, offset) of the value's container, or None when it
# covers no text.
TEXT, NODE, INLINE, PENDING, NOTHING = range(5)
_NOTHING = (NOTHING, None, None, None)
_END = "$END"


class Meta:
    """The positions a rule's function reads (the attributes of Lark's ``Meta``)."""

    __slots__ = ("empty", "line", "column", "start_pos", "end_line", "end_column", "end_pos")

    def __init__(self, start: tuple[int, int, int] | None, end: tuple[int, int, int] | None) -> None:
        self.empty = start is None
        if start is not None:
            self.line, self.column, self.start_pos = start
            self.end_line, self.end_column, self.end_pos = end


@dataclass(frozen=True)
class _Reduction:
    """How Lark shapes one grammar rule's node (``lark.parse_tree_builder``): which children it keeps
    (``include``: (index, splice, placeholders before it)), placeholders after them, whether a single child
    stands for the node, and the function that makes the node (None: a ``_rule``, or no function)."""

    origin: str  # the nonterminal it reduces to (the goto)
    size: int
    include: tuple[tuple[int, bool, int], ...]
    trailing: int
    single_child_stands: bool
    inline: bool  # a ``_rule``: its children are spliced into its parent's
    function: Callable | None
    unit: bool  # a ``?rule`` of one kept child and nothing else: the child stands, unchanged (most reductions)


@dataclass(frozen=True)
class _LexerState:
    """A parser state's lexer: its terminals as one regular expression, ignored terminals,
    terminals that may hold a newline, and per-terminal callbacks (keywords over names)."""

    pattern: re.Pattern  # the state's terminals, in Lark's order: the first that matches is the token
    ignore: frozenset[str]
    newlines: frozenset[str]
    keywords: dict  # terminal -> the Scanner of the keywords it may be (Lark's ``UnlessCallback``)
    others: frozenset[str]  # terminals with another callback: the driver leaves such text to Lark


class Driver:
    """Parse text in place with one Lark LALR parser's tables, calling ``functions(name)``'s function of
    ``(meta, children)`` to make each node (``functions`` gives None for a rule without one: the driver then
    gives up where Lark would make that node, and the caller takes Lark's path)."""

    def __init__(self, parser: Lark, functions: Callable[[str], Callable | None]) -> None:
        frontend = parser.parser
        tables = frontend.parser.parser.parse_table
        start = frontend.parser_conf.start[0]
        self.start_state, self.end_state = tables.start_states[start], tables.end_states[start]
        placeholders = parser.options.maybe_placeholders
        reductions = {rule: _reduction(rule, placeholders, functions) for rule in parser.rules}
        # state -> symbol -> the next state (an int: shift, or goto after a reduction) or the _Reduction
        self.actions: dict[int, dict[str, int | _Reduction]] = {
            state: {symbol: arg if action is Shift else reductions[arg] for symbol, (action, arg) in row.items()}
            for state, row in tables.states.items()
        }
        by_lexer: dict[int, _LexerState] = {}
        self.lexers: dict[int, _LexerState] = {}
        for state, lexer in frontend.lexer.lexers.items():
            if id(lexer) not in by_lexer:
                scanner = lexer.scanner  # built on first use: it also fills ``lexer.callback``
                callbacks = lexer.callback
                keywords = {kind: c.scanner for kind, c in callbacks.items() if type(c) is UnlessCallback}
                by_lexer[id(lexer)] = _LexerState(
                    _master_pattern(scanner),
                    frozenset(lexer.ignore_types),
                    frozenset(lexer.newline_types),
                    keywords,
                    frozenset(callbacks) - set(keywords),
                )
            self.lexers[state] = by_lexer[id(lexer)]
        # (state under the top, top state, token) -> the state after a run of unit reductions: most reductions
        # are of one ``?rule`` to the next (an operand climbing the operators' precedence levels)
        self.units: dict[tuple[int, int, str], int] = {}

    def _after_units(self, key: tuple[int, int, str], action: _Reduction) -> int:
        """The state after the run of unit reductions that ``action`` starts, the state under them and the
        token being ``key``'s: each pops the top state and pushes the goto of the state under it."""
        below, top, kind = key
        while action.__class__ is not int and action.unit:
            top = self.actions[below][action.origin]
            if kind == _END and top == self.end_state:
                break
            action = self.actions[top].get(kind)
            if action is None:
                break
        return top

    def parse(self, text: str, start: int, end: int, line: int, line_start: int) -> object | None:
        """What Lark's parse of ``text[start:end]`` (positions those of the file: ``line`` at ``start``,
        which begins at ``line_start``), transformed, gives; or None: see the module's doc."""
        actions, lexers, units = self.actions, self.lexers, self.units
        state_stack = [self.start_state]
        values: list[tuple] = []
        pos, column = start, start - line_start + 1
        while True:
            if pos < end:
                lexer = lexers[state_stack[-1]]
                found = lexer.pattern.match(text, pos, end)  # never past ``end``
                if found is None:
                    return None
                value, kind = found.group(), found.lastgroup
                token_start = (line, column, pos)
                if kind in lexer.newlines and "\n" in value:
                    line += value.count("\n")
                    line_start = pos + value.rindex("\n") + 1
                pos += len(value)
                column = pos - line_start + 1
                if kind in lexer.ignore:  # by the terminal the lexer matched, as Lark's lexer decides
                    continue
                if kind in lexer.keywords:  # a name that may be a keyword: what Lark's ``UnlessCallback`` does
                    kind = lexer.keywords[kind].fullmatch(value) or kind
                elif kind in lexer.others:
                    return None
                item = (TEXT, (kind, value), token_start, (line, column, pos))
            else:
                kind, item = _END, None
            while True:  # reduce until the token shifts (at the end: until the end state)
                action = actions[state_stack[-1]].get(kind)
                if action is None:
                    return None
                if action.__class__ is int:
                    if item is None:
                        return None
                    state_stack.append(action)
                    values.append(item)
                    break
                if action.unit:  # the value stays; only the state changes
                    key = (state_stack[-2], state_stack[-1], kind)
                    top = units.get(key)
                    if top is None:
                        top = units[key] = self._after_units(key, action)
                    state_stack[-1] = top
                    if item is None and top == self.end_state:
                        return _value(values[-1])
                    continue
                size = action.size
                if size:
                    children = values[-size:]
                    del values[-size:]
                    del state_stack[-size:]
                else:
                    children = []
                made = _reduce(action, children)
                if made is None:
                    return None
                state_stack.append(actions[state_stack[-1]][action.origin])
                values.append(made)
                if item is None and state_stack[-1] == self.end_state:
                    return _value(values[-1])


def _master_pattern(scanner: Scanner) -> re.Pattern:
    """One compiled alternation of a state's terminals in Lark's order, from Lark's own terminal patterns and
    flags: the first alternative that matches wins, as in Lark's ``Scanner`` (which splits the alternation
    into chunks only for old limits on the number of groups)."""
    alternatives = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals)
    return scanner.re_.compile(alternatives, scanner.g_regex_flags)


def _reduction(rule, placeholders: bool, functions: Callable[[str], Callable | None]) -> _Reduction:
    """Lark's shaping of ``rule``'s node, from Lark's own function for it (``maybe_create_child_filter``)."""
    options = rule.options
    shaped = maybe_create_child_filter(
        rule.expansion, options.keep_all_tokens, False, options.empty_indices if placeholders else None
    )
    size = len(rule.expansion)
    if shaped is None:
        include, trailing = tuple((i, False, 0) for i in range(size)), 0
    elif len(shaped.args) == 2:  # with placeholders: (to_include, trailing Nones)
        include, trailing = tuple(shaped.args[0]), shaped.args[1]
    else:
        include, trailing = tuple((i, splice, 0) for i, splice in shaped.args[0]), 0
    name = rule.alias or options.template_source or rule.origin.name
    inline = name.startswith("_")
    return _Reduction(
        origin=rule.origin.name,
        size=size,
        include=include,
        trailing=trailing,
        single_child_stands=bool(options.expand1 and not rule.alias),
        inline=inline,
        function=None if inline else functions(name),
        unit=bool(options.expand1 and not rule.alias) and size == 1 and include == ((0, False, 0),) and not trailing,
    )


def _reduce(reduction: _Reduction, children: list[tuple]) -> tuple | None:
    """One reduction: the kept children, and the node (or the single child standing for it) with the
    container positions Lark's ``PropagatePositions`` gives it; None when the driver cannot follow."""
    kept: list[tuple] = []
    for index, splice, nones in reduction.include:
        if nones:
            kept += [_NOTHING] * nones
        child = children[index]
        if not splice:
            kept.append(child)
        elif child[0] == INLINE:
            kept += child[1]
        else:
            return None
    if reduction.trailing:
        kept += [_NOTHING] * reduction.trailing
    start = end = None
    for child in children:
        if child[2] is not None:
            start = child[2]
            break
    for child in reversed(children):
        if child[3] is not None:
            end = child[3]
            break
    if reduction.single_child_stands and len(kept) == 1:
        only = kept[0]
        if start is None or only[0] not in (NODE, PENDING):
            return only
        if only[0] == NODE:
            return (NODE, only[1], start, end)
        function, values = only[1]  # its own positions were empty: they become the container's
        return (NODE, function(Meta(start, end), values), start, end)
    if reduction.inline:
        return (INLINE, kept, start, end)
    function = reduction.function
    if function is None:
        return None
    values = [_value(child) for child in kept]
    if start is None:
        return (PENDING, (function, values), None, None)
    return (NODE, function(Meta(start, end), values), start, end)


def _value(item: tuple) -> object:
    """What a stack item is to its parent's function: the token, the node, or None (a placeholder)."""
    kind = item[0]
    if kind == TEXT:
        (line, column, start), (end_line, end_column, end) = item[2], item[3]
        return Token(item[1][0], item[1][1], start, line, column, end_line, end_column, end)
    if kind == PENDING:
        function, values = item[1]
        return function(Meta(None, None), values)
    return item[1]

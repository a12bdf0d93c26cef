"""The Pike VM: runs a ``Program`` over one partition's rows, fed incrementally.

How SQL's semantics map onto the machine
----------------------------------------
* A *search* begins at a start position. At every position a new thread is started at the lowest
  priority (as Go's unanchored search does) until some thread reaches DONE; the threads list is kept
  in priority order, so earlier starts come first and, within a start, the preferred path first.
  This is exactly "try each start row in order; at the first one with a match, take the first match
  in preference order".
* When a thread reaches DONE it becomes the best match so far and every thread after it (lower
  priority) is dropped. The best match is final once no thread before it is alive.
* Two threads at the same instruction at the same position are merged (the later one dropped) when
  they are equivalent for every DEFINE condition still to be evaluated (``equivalence.py``); for
  conditions that read only the current row and fixed PREV/NEXT offsets, that is always. This keeps
  the number of live threads bounded by the program size, so hostile patterns run in linear time.
* When the conditions read the match history (or WITHIN ties a thread to its start), threads of
  different starts can practically never merge, and running every start at once only does work for
  starts that an earlier match will make moot. Then starts are tried one at a time ("lazy starts"):
  a new start is tried only when every thread of the current one has died, rewinding to the row after
  it (the rows are still buffered). A start sees the rows up to where its threads die, so this is much
  less work when the earliest start usually matches; a start whose threads live to the end of input
  makes the next start run to the end again (at ``finish``), quadratic only over such a tail.
* A final match is emitted, AFTER MATCH SKIP picks the next start position, and a new search begins
  there. Rows the new search needs again are still buffered.
* ``$`` holds only after the partition's last row; a thread that reaches it before the end of input
  waits, and dies when another row arrives.
* Event time (WITHIN): before row p is consumed, and when ``advance(now)`` says no row older than
  ``now`` will come, threads whose first row is WITHIN or more before that time are dropped (with
  SHOW TIMEOUT MATCHES, a start whose partial matches all expire is reported as a TIMEOUT row), and
  threads waiting at DEADLINE (a trailing ``!B``) complete.

State is plain data (``state()``/``from_state()``): buffered columns, threads as (pc, start, labels,
exclusion marks), counters. Nothing refers to the compiled query, so it can live in Spark's state store.
"""

from __future__ import annotations

import gc
from typing import Any, NamedTuple

from cep.grammar.errors import CepRuntimeError
from cep.matcher.program.instructions import AT_END, AT_START, DEADLINE, DONE, EXCL_BEGIN, EXCL_END, JUMP, LABEL, SPLIT
from cep.matcher.program.output import PartitionOutput
from cep.matcher.sql.context import ThreadView

STATE_VERSION = 1

# A partition may not hold more live threads than this. The merge rule keeps patterns whose
# conditions read only the current row below the program size; conditions that read the match
# history (aggregates, FIRST) over long ambiguous matches can need more. Each live thread costs about
# a microsecond per row, so 10,000 is already ~10 ms a row: we stop there with a clear error (and
# quickly, since the count grows by the row) rather than crawl or exhaust memory.
MAX_LIVE_THREADS = 10_000

# Lazy starts (see the module docstring) try each start row alone; when the input ends with the current
# start's partial match still open, every later start must scan the rest of the partition again, so an
# open tail of n rows costs about n*n/2 row steps (a few microseconds each). Past this many the partition
# is refused with E0431 instead of running for minutes or hours: 2,000,000 lets a 2,000-row open tail
# finish in a few seconds. WITHIN, or a pattern whose partial matches can fail, keeps tails short.
MAX_TAIL_RESCAN_ROWS = 2_000_000

# ``_admit_another`` traces a merged thread only when told its exclusion marks (which may be None).
UNTRACED = object()

# Buffered rows are trimmed in chunks rather than on every row: slicing lists is O(n).
TRIM_CHUNK = 4096


class Thread(NamedTuple):
    """One partial match: instruction, start row, labels (newest first, as a cons list), exclusions.

    The VM makes one or two threads a row, so it makes them as plain tuples of these four fields
    (a tenth of the cost of a class instance) and reads them by unpacking or by index (``START``);
    this named form is for the tracer and for code off the per-row path.
    """

    pc: int
    start: int
    chain: Any  # (label, older[, running states]) for rows start..position-1, newest first; None if empty
    marks: Any  # (position, is_begin, older) exclusion marks, newest first; None if none


PC, START = 0, 1  # indexes of Thread fields


class PartitionMatcher(PartitionOutput):
    """Matches one partition. ``feed`` rows in ORDER BY order; ``finish`` at end of input.

    ``machine`` is the compiled query's ``Machine`` (program, conditions, skip rule, output builder).
    Each call returns the output rows that became certain; numbering, unmatched rows and AFTER MATCH
    SKIP are ``PartitionOutput``'s.
    """

    def __init__(self, machine, key: tuple = ()) -> None:
        super().__init__(machine, key, {name: [] for name in machine.columns})
        self.view = ThreadView()
        self.env.view = self.view
        self.step_constants = _step_constants(machine)
        self.base = 0
        self.total = 0
        self.finished = False
        self.position = 0
        self.started_upto = 0
        self.tail_rescan_rows = 0  # rows scanned again at end of input by lazy starts (MAX_TAIL_RESCAN_ROWS)
        self.abandoned = 0  # partial matches given up by abandon_before (a cap on kept rows)
        self.threads: list[Thread] = []
        self.visited: dict = {}
        self.best: tuple | None = None  # (start, end, chain, marks)
        self.done_pending = False  # a thread reached DONE since the last _settle
        self.tracer = None  # a cep.matcher.pike.trace.Tracer when tracing ("why didn't this match?")
        self.clock = None  # the latest event time passed to advance()

    # ------------------------------------------------------------------------------------------ input

    def feed(self, columns: dict[str, list]) -> list[tuple]:
        """Append rows (column name -> values, all the same length) and run as far as they allow."""
        if self.finished:
            raise CepRuntimeError("rows fed after finish()", code="E0420")
        count = None
        for name, target in self.cols.items():
            values = columns[name]
            count = len(values) if count is None else count
            target.extend(values)
        if count is None:  # a query that reads no column still counts rows
            count = len(next(iter(columns.values()))) if columns else 0
        self.total += count
        self.env.total = self.total
        self._run()
        return self.take_output()

    def advance(self, now) -> list[tuple]:
        """Event time reached ``now``: no row with an earlier time will be fed. Expire and complete."""
        if now is not None and (self.clock is None or now > self.clock):
            self.clock = now
        self._run()  # _loop applies the clock once the buffered rows are consumed
        return self.take_output()

    def finish(self) -> list[tuple]:
        """End of input: complete what can complete (``$``, trailing greedy loops) and flush."""
        self.finished = True
        self._run()
        return self.take_output()

    # -------------------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        # The matcher's structures are acyclic (label cons lists, threads), so reference counting frees
        # them; left on, the cyclic collector rescans every live partial match at each collection,
        # which made long matches 3x slower. It is switched off only while the loop runs.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._loop()
        except CepRuntimeError as error:  # a DEFINE condition failed: say at which partition and row
            raise self.locate(error) from None
        finally:
            if collecting:
                gc.enable()

    def _loop(self) -> None:
        machine = self.machine
        lookahead = machine.lookahead
        lazy = machine.lazy_starts
        while True:
            if (self.done_pending or (self.best is not None and not self.threads)) and self._settle():
                continue
            p = self.position
            if self.best is None and self.started_upto == p and p < self.total and not (lazy and self.threads):
                self.started_upto = p + 1
                self._add_thread(self.threads, self.visited, 0, p, None, None, p)
                if self.done_pending and self._settle():
                    continue
            if p < self.total:
                if not self.threads:
                    self._no_threads_at(p + 1)
                    continue
                if p + lookahead >= self.total and not self.finished:
                    return
                if machine.within is not None and self._advance_time(self.env.value(machine.within.column, p)):
                    continue
                self._steps(p)
                continue
            # The buffered rows are consumed. The clock (``advance``) is known to every start, not only
            # to the one alive when it was told: a start tried after a rewind expires by it too, so the
            # output does not depend on how often (or in which micro-batches) the time was given.
            if (
                machine.within is not None
                and self.clock is not None
                and self.threads
                and self._advance_time(self.clock)
            ):
                continue
            if not self.finished:
                return
            # End of input: p == total. Threads waiting at `$` may now finish; the rest cannot.
            if self._finish_at_end():
                continue
            if self.best is None and lazy and self.started_upto < self.total:
                # Lazy starts: the input ended with threads of the current start still alive, so the
                # later start rows were never tried; they may still match in the rows that are left.
                # Each start left runs over the rows after it again: quadratic in the length of a
                # tail that every start survives, which is what a per-start matcher (Trino) pays too;
                # running them at once instead costs more (threads of distinct histories never merge).
                self.tail_rescan_rows += self.total - self.started_upto
                if self.tail_rescan_rows > MAX_TAIL_RESCAN_ROWS:
                    raise CepRuntimeError(
                        f"in partition {self.describe_key()} a partial match stays open to the end of the input, and "
                        f"trying each later start over the rest of it would scan more than {MAX_TAIL_RESCAN_ROWS:,} "
                        "rows again (MAX_TAIL_RESCAN_ROWS)",
                        code="E0431",
                        hint="bound the pattern with WITHIN, or end it with a variable whose condition can fail",
                    )
                self._rewind()
                continue
            self.emit_unmatched(self.search_start, self.total)
            self.search_start = self.total
            return

    def _no_threads_at(self, next_position: int) -> None:
        """Nothing alive and nothing matched: the rows before ``next_position`` start no match."""
        self.position = next_position
        self.visited = {}
        if self.best is None:
            self.emit_unmatched(self.search_start, next_position)
            self.search_start = next_position
            self._trim()

    def _steps(self, p: int) -> None:
        """Consume row ``p`` in every thread, in priority order; then the rows after it while nothing
        needs ``_loop``: no thread reached DONE, some thread is alive, the next row is in, and no WITHIN.

        Rows are stepped here rather than one per ``_loop`` turn because the per-row bookkeeping was
        most of the cost of a row when one or two threads are alive (lazy starts). A new start that is
        due (at every row, or after a failed lazy start) is added here exactly as ``_loop`` adds it.
        """
        at_label, done_pc, first, lazy, lookahead, advance, within, merge_by_pc, trim_at = self.step_constants
        env, view, tracer = self.env, self.view, self.tracer
        env.match_number = self.match_number + 1
        quiet = tracer is None and not self.machine.output.wants_unmatched
        # Constant while this runs: rows arrive only between calls, and a match found (done_pending)
        # returns to _loop, the only place ``best`` changes.
        total, finished, best = self.total, self.finished, self.best
        while True:
            env.row = view.row = p
            next_threads: list[Thread] = []
            visited: dict = {}
            # Conditions that read no match history give the same answer for every thread on this row:
            # evaluate each once (PERMUTE and bounded quantifiers put many threads on one label).
            memo: dict | None = {} if merge_by_pc else None
            for thread in self.threads:
                pc, start, chain, marks = thread
                entry = at_label[pc]
                if entry is None:
                    # A thread waiting at `$` (a row arrived, so this is not the end) or at DEADLINE (a row
                    # arrived before the deadline: the absence goes on in its sibling thread, which reads it).
                    if tracer is not None and self.machine.opcodes[pc] == AT_END:
                        tracer.dropped(
                            self, p, Thread(*thread), "another row arrived, so this is not the partition's end ($)"
                        )
                    continue
                label, condition, targets = entry
                if condition is not None:
                    if memo is not None and label in memo:
                        held = memo[label]
                    else:
                        # ThreadView.reset, inlined (this runs for every thread at every row)
                        view.start, view.current, view.chain, view.labels_cache = start, label, chain, None
                        held = condition(env)
                        if memo is not None:
                            memo[label] = held
                    if tracer is not None:
                        tracer.tested(self, p, Thread(*thread), label, held)
                    if held is not True:
                        continue
                if advance is None:
                    chain = (label, chain)
                else:  # the node carries the running DEFINE aggregates after this row (running.py)
                    chain = (label, chain, advance(None if chain is None else chain[2], env, p, label))
                if targets is None:
                    self._add_thread(next_threads, visited, pc + 1, start, chain, marks, p + 1)
                    continue
                # _add_thread's precomputed case, inlined: most rows park one or two threads.
                for target in targets:
                    if target not in visited:
                        visited[target] = (start, chain)
                    elif not self._admit_another(visited, target, start, chain, p + 1, marks):
                        continue
                    next_threads.append((target, start, chain, marks))
                    if target == done_pc:
                        self.done_pending = True
            if tracer is not None:
                tracer.alive(self, p, [Thread(*t) for t in next_threads])
            if len(next_threads) > MAX_LIVE_THREADS:
                raise CepRuntimeError(
                    f"more than {MAX_LIVE_THREADS} live partial matches in partition {self.describe_key()} "
                    "(MAX_LIVE_THREADS); the pattern is too ambiguous for its DEFINE conditions",
                    code="E0430",
                )
            self.threads, self.visited = next_threads, visited
            p = self.position = p + 1
            if best is None:
                if next_threads:
                    # Threads are ordered by start: rows before the earliest live start can start no match.
                    if next_threads[0][START] > self.search_start:
                        self._skip_unmatched(next_threads[0][START])
                elif lazy and self.started_upto < p:  # the current start failed: try the next one, from its own row
                    if quiet and self.started_upto - self.base < trim_at:
                        # _rewind when it has nothing to trace, emit or trim (most failed starts)
                        p = self.position = self.search_start = self.started_upto
                        self.threads, self.visited = [], {}
                    else:
                        self._rewind()
                        p = self.position
                elif p > self.search_start:
                    self._skip_unmatched(p)
            # Go on to the next row only where _loop would do nothing but step it.
            if self.done_pending or p >= total or (p + lookahead >= total and not finished):
                return
            if best is None and self.started_upto == p and not (lazy and self.threads):
                self.started_upto = p + 1
                if first is not None and not self.threads:
                    # A pattern that begins with one variable (most do), and no thread to merge with:
                    # what _add_thread would do, without the call (lazy starts make one per failed start).
                    self.threads = [(first, p, None, None)]
                    self.visited[first] = (p, None)
                else:
                    self._add_thread(self.threads, self.visited, 0, p, None, None, p)
                    if self.done_pending:
                        return
            if not self.threads:
                return  # nothing alive, or a final match: _loop emits it
            if within is not None and self._expires_by(p):
                return  # _loop expires threads (and completes deadlines) before this row

    def _skip_unmatched(self, earliest: int) -> None:
        """No live or future thread starts before ``earliest``: those rows end unmatched.

        (``emit_unmatched`` and ``_trim`` are called only when they have work: this runs at every
        failed lazy start.)
        """
        machine = self.machine
        if machine.output.wants_unmatched:
            self.emit_unmatched(self.search_start, earliest)
        self.search_start = earliest
        if earliest - machine.lookback - self.base >= TRIM_CHUNK:
            self._trim()

    def _expires_by(self, p: int) -> bool:
        """Does WITHIN expire some live thread at row ``p``'s time? Threads are ordered by start, so
        the first one is the first to expire."""
        within, env = self.machine.within, self.env
        return within.expired(env.value(within.column, self.threads[0][START]), env.value(within.column, p))

    def _rewind(self) -> None:
        """Lazy starts: every thread of the start just tried has died; resume at the next start row."""
        next_start = self.started_upto
        if self.tracer is not None:
            self.tracer.restart(self, self.position - 1, next_start)
        self.threads = []
        self.visited = {}
        self.position = next_start
        self._skip_unmatched(next_start)

    def _add_thread(self, out: list, visited: dict, pc: int, start: int, chain, marks, position: int) -> None:
        """Follow epsilon instructions from ``pc`` in priority order; park threads at LABEL/DONE/`$`.

        An explicit stack instead of recursion: unrolled quantifiers make long epsilon chains.
        ``visited`` maps each pc reached at this position to its first thread's (start, chain), or to
        the set of equivalence keys of the threads there once a second one arrived: most pcs see only
        one thread per row, so the key (a walk over the history) is computed only on a collision.
        """
        machine = self.machine
        targets = machine.closures[pc]
        if targets is not None:
            for target in targets:
                if target not in visited:
                    visited[target] = (start, chain)
                elif not self._admit_another(visited, target, start, chain, position, marks):
                    continue
                out.append((target, start, chain, marks))
                if target == machine.done_pc:
                    self.done_pending = True
            return
        ops, args, bargs = machine.opcodes, machine.operands, machine.second_targets
        stack = [(pc, marks)]
        while stack:
            pc, marks = stack.pop()
            if pc not in visited:
                visited[pc] = (start, chain)
            elif not self._admit_another(visited, pc, start, chain, position):
                continue
            op = ops[pc]
            if op == LABEL or op == DONE or op == DEADLINE:
                out.append((pc, start, chain, marks))
                if op == DONE:
                    self.done_pending = True
            elif op == SPLIT:
                stack.append((bargs[pc], marks))
                stack.append((args[pc], marks))
            elif op == JUMP:
                stack.append((args[pc], marks))
            elif op == EXCL_BEGIN:
                stack.append((pc + 1, (position, True, marks)))
            elif op == EXCL_END:
                stack.append((pc + 1, (position, False, marks)))
            elif op == AT_START:
                if position == 0:
                    stack.append((pc + 1, marks))
            elif op == AT_END:
                if position < self.total:
                    continue
                if self.finished:
                    stack.append((pc + 1, marks))
                else:
                    out.append((pc, start, chain, marks))  # waits for more rows or the end

    def _admit_another(self, visited: dict, pc: int, start: int, chain, position: int, marks=UNTRACED) -> bool:
        """A thread reaches ``pc`` where another already is: keep it unless the two are equivalent.

        Equivalent means equal equivalence keys (``equivalence.py``); with no key function, any two
        threads at one pc are. The same start and history object is the same thread met again on an
        epsilon loop, equivalent without computing anything. A thread merged away is traced as dropped
        when its ``marks`` are given (the parked pcs precomputed in ``Machine.closures``).
        """
        key_of = self.machine.equivalence_key
        admitted = False
        if key_of is not None:
            seen = visited[pc]
            if type(seen) is tuple and seen[0] == start and seen[1] is chain:
                seen = None
            elif type(seen) is tuple:
                seen = visited[pc] = {key_of(self, seen[0], seen[1], position)}
            if seen is not None:
                key = key_of(self, start, chain, position)
                admitted = key not in seen
                seen.add(key)
        if not admitted and marks is not UNTRACED and self.tracer is not None:
            self.tracer.dropped(
                self,
                position - 1,
                Thread(pc, start, chain, marks),
                "merged into an equivalent partial match that started earlier",
            )
        return admitted

    def _settle(self) -> bool:
        """Record the first thread at DONE as the best match and drop the threads after it.

        Returns True when that made a match final (and a new search has begun).
        """
        threads = self.threads
        if self.done_pending:
            self.done_pending = False
            ops = self.machine.opcodes
            for index, (pc, start, chain, marks) in enumerate(threads):
                if ops[pc] == DONE:
                    self.best = (start, self.position - 1, chain, marks)
                    if self.tracer is not None:
                        for lower in threads[index + 1 :]:
                            self.tracer.dropped(
                                self, self.position - 1, Thread(*lower), "a preferred partial match has finished"
                            )
                    del threads[index:]
                    break
        if not threads and self.best is not None:
            self._finalize()
            return True
        return False

    def _finish_at_end(self) -> bool:
        """At end of input, let threads waiting at `$` complete, in priority order."""
        waiting, self.threads = self.threads, []
        visited: dict = {}
        ops = self.machine.opcodes
        for thread in map(Thread._make, waiting):
            if ops[thread.pc] != AT_END and self.tracer is not None:
                self.tracer.dropped(self, self.total - 1, thread, "the input ended before the pattern completed")
            if ops[thread.pc] == AT_END:
                self._add_thread(
                    self.threads, visited, thread.pc + 1, thread.start, thread.chain, thread.marks, self.total
                )
        self.threads = [t for t in self.threads if ops[t[PC]] == DONE]
        return self._settle()

    def _advance_time(self, now) -> bool:
        """Drop threads that WITHIN has expired by ``now``; complete threads at DEADLINE.

        Returns True when that made a match final. Threads are ordered by start, so expired threads
        come first; each start whose threads all expired without a match is a TIMEOUT.
        """
        within = self.machine.within
        if now is None or not self.threads:
            return False
        ops = self.machine.opcodes
        kept: list[Thread] = []
        expired_starts: dict[int, Thread] = {}
        changed = False
        for thread in map(Thread._make, self.threads):
            # WITHIN bounds the rows of a match: a thread at DONE, or waiting at `$` (it takes no more
            # rows; the end of the partition completes it), has all its rows inside the limit.
            if ops[thread.pc] in (DONE, AT_END) or not within.expired(self.env.value(within.column, thread.start), now):
                kept.append(thread)
                continue
            changed = True
            if ops[thread.pc] == DEADLINE:
                self._add_thread(
                    kept, self.visited, thread.pc + 1, thread.start, thread.chain, thread.marks, self.position
                )
            else:
                expired_starts.setdefault(thread.start, thread)
                if self.tracer is not None:
                    self.tracer.dropped(self, self.position, thread, "WITHIN expired")
        if not changed:
            return False
        self.threads = kept
        live_starts = {t[START] for t in kept}
        matched_start = self.best[0] if self.best is not None else None
        for start, thread in expired_starts.items():
            if start not in live_starts and start != matched_start and self.machine.output.show_timeout:
                labels = _chain_to_list(thread.chain)
                self.out.extend(self.machine.output.timeout(self, start, start + len(labels) - 1, labels))
        if self.best is None and not kept and self.machine.lazy_starts and self.started_upto < self.position:
            self._rewind()
            return True
        if self.best is None and kept and kept[0][START] > self.search_start:
            self.emit_unmatched(self.search_start, kept[0][START])
            self.search_start = kept[0][START]
        elif self.best is None and not kept:
            self.emit_unmatched(self.search_start, self.position)
            self.search_start = self.position
        return self._settle()

    # ------------------------------------------------------------------------------------- a match

    def _finalize(self) -> None:
        start, end, chain, marks = self.best
        self.best = None
        labels = _chain_to_list(chain)
        machine = self.machine
        if self.tracer is not None:
            self.tracer.matched(self, self.match_number + 1, start, end, labels)
        self.match_states = chain[2] if chain is not None and machine.advance_running is not None else None
        next_start = self.emit_match(start, end, labels, _excluded(marks))
        self.position = self.started_upto = next_start
        self.threads = []
        self.visited = {}
        if next_start - machine.lookback - self.base >= TRIM_CHUNK:
            self._trim()

    # ---------------------------------------------------------------------------------------- memory

    def abandon_before(self, cutoff: int) -> list[tuple]:
        """Give up every partial match that started before row ``cutoff``, so that the rows before it
        can go: the streaming cap on the rows one key keeps for partial matches that never end.

        A start given up ends unmatched, as if its next condition had failed; the search goes on at
        ``cutoff`` (lazy starts: the rows from there are tried again, as after a failed start). A
        match already found, waiting only for a preferred longer one, is kept and emitted. Counts the
        partial matches dropped in ``abandoned``; returns the output rows that became certain.
        """
        cutoff = min(cutoff, self.position)
        if cutoff <= self.search_start:
            return []
        kept = [t for t in self.threads if t[START] >= cutoff]
        self.abandoned += len(self.threads) - len(kept)
        if self.best is not None and self.best[0] < cutoff:
            self.threads = []  # only the found match remains: _loop makes it final
        elif self.machine.lazy_starts and not kept:
            self.started_upto = max(self.started_upto, cutoff)
            self._rewind()
        else:
            self.threads, self.visited = kept, {}  # a new start may now reach a pc a dropped thread held
            if self.best is None:
                self.emit_unmatched(self.search_start, cutoff)
                self.search_start = cutoff
        self._trim(chunk=1)
        self._run()
        return self.take_output()

    def compact(self) -> None:
        """Drop every buffered row nothing can reach any more (before saving state, say)."""
        self._trim(chunk=1)

    def next_deadline(self):
        """The event time at which WITHIN next expires or completes a partial match here; None if none."""
        within = self.machine.within
        if within is None or not self.threads:
            return None
        first = self.env.value(within.column, min(thread[START] for thread in self.threads))
        return None if first is None else within.deadline(first)

    def _trim(self, chunk: int = TRIM_CHUNK) -> None:
        """Drop buffered rows that no thread, navigation or output can reach any more."""
        keep_from = self.search_start - self.machine.lookback
        if keep_from - self.base < chunk:
            return
        cut = keep_from - self.base
        for values in self.cols.values():
            del values[:cut]
        self.base = keep_from
        self.env.base = keep_from

    def buffered_rows(self) -> int:
        return self.total - self.base

    def live_threads(self) -> int:
        return len(self.threads)

    # ----------------------------------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as plain data (lists, ints, scalars)."""
        return {
            "version": STATE_VERSION,
            "key": list(self.key),
            "cols": {name: list(values) for name, values in self.cols.items()},
            "base": self.base,
            "total": self.total,
            "finished": self.finished,
            "search_start": self.search_start,
            "position": self.position,
            "started_upto": self.started_upto,
            "threads": [
                [pc, start, _chain_to_list(chain), _marks_to_list(marks)] for pc, start, chain, marks in self.threads
            ],
            "best": None
            if self.best is None
            else [self.best[0], self.best[1], _chain_to_list(self.best[2]), _marks_to_list(self.best[3])],
            "match_number": self.match_number,
            "covered_upto": self.covered_upto,
            "clock": self.clock,
        }

    @classmethod
    def from_state(cls, machine, state: dict[str, Any]) -> PartitionMatcher:
        if state.get("version") != STATE_VERSION:
            raise CepRuntimeError(f"matcher state version {state.get('version')} is not {STATE_VERSION}", code="E0421")
        matcher = cls(machine, tuple(state["key"]))
        for name, values in state["cols"].items():
            matcher.cols[name].extend(values)
        matcher.base = matcher.env.base = state["base"]
        matcher.total = matcher.env.total = state["total"]
        matcher.finished = state["finished"]
        matcher.search_start = state["search_start"]
        matcher.position = state["position"]
        matcher.started_upto = state["started_upto"]
        matcher.match_number = state["match_number"]
        matcher.covered_upto = state["covered_upto"]
        matcher.clock = state.get("clock")
        matcher.threads = [
            Thread(pc, start, matcher._replay_chain(start, labels), _list_to_marks(marks))
            for pc, start, labels, marks in state["threads"]
        ]
        # Rebuild the merge set for the current position, so a thread started after a restore is
        # merged exactly as it would have been without one.
        for thread in matcher.threads:
            if thread.pc not in matcher.visited:
                matcher.visited[thread.pc] = (thread.start, thread.chain)
            else:
                matcher._admit_another(matcher.visited, thread.pc, thread.start, thread.chain, matcher.position)
        if state["best"] is not None:
            start, end, labels, marks = state["best"]
            matcher.best = (start, end, matcher._replay_chain(start, labels), _list_to_marks(marks))
        return matcher

    @classmethod
    def resume(
        cls, machine, key: tuple, context: dict[str, list], *, position: int, match_number: int
    ) -> PartitionMatcher:
        """A matcher for a partition whose starts before its next row are all decided (another engine
        decided them): ``context`` holds the rows just before that row (PREV reads them; none of them a
        start), ``position`` the partition position of the first of them, ``match_number`` the matches
        emitted so far. What it then emits is what a matcher fed the whole partition would emit."""
        matcher = cls(machine, key)
        for name, values in context.items():
            matcher.cols[name].extend(values)
        head = position + (len(next(iter(context.values()))) if context else 0)
        matcher.base = matcher.env.base = position
        matcher.total = matcher.env.total = head
        matcher.search_start = matcher.position = matcher.started_upto = head
        matcher.match_number = match_number
        matcher.covered_upto = head - 1
        return matcher

    def first_undecided(self) -> int:
        """The first start this matcher still weighs: a live partial match's, a found match's, or the next it
        would try (``search_start`` may lag behind starts already given up, by the match cap say)."""
        weighed = [thread[START] for thread in self.threads] + ([self.best[0]] if self.best is not None else [])
        return max(self.search_start, min(weighed + [self.started_upto]))

    def _replay_chain(self, start: int, labels: list[int]):
        """A thread's label chain rebuilt from its labels, with the running aggregates replayed over
        the buffered rows (they are derived state, so the serialized form does not carry them)."""
        advance = self.machine.advance_running
        if advance is None:
            return _list_to_chain(labels)
        chain = None
        for offset, label in enumerate(labels):
            chain = (label, chain, advance(None if chain is None else chain[2], self.env, start + offset, label))
        return chain


def match_partition(machine, key: tuple, columns: dict[str, list], clock=None) -> list[tuple]:
    """All output of one whole partition: ``columns`` holds its rows in ORDER BY order; ``clock`` is the
    event time at the end of input (WITHIN deadlines and timeouts), None for none."""
    matcher = PartitionMatcher(machine, key)
    rows = matcher.feed(columns)
    if clock is not None:
        rows.extend(matcher.advance(clock))
    rows.extend(matcher.finish())
    return rows


def _step_constants(machine) -> tuple:
    """What ``_steps`` reads of the machine, in one tuple (it starts once per match, or more).

    ``at_label[pc]`` is, for a LABEL instruction, (label, its condition, the pcs the next row's threads
    park at: ``Machine.closures[pc + 1]``), and None for any other instruction.
    """
    ops, args, conditions, closures = machine.opcodes, machine.operands, machine.conditions, machine.closures
    at_label = tuple(
        (args[pc], conditions[args[pc]], closures[pc + 1]) if op == LABEL else None for pc, op in enumerate(ops)
    )
    # The one LABEL a new start parks at, when the pattern's start leads to exactly one.
    first = closures[0][0] if closures[0] and len(closures[0]) == 1 and ops[closures[0][0]] == LABEL else None
    # _trim has work once the search starts this far past the first buffered row
    trim_at = TRIM_CHUNK + machine.lookback
    return (
        at_label,
        machine.done_pc,
        first,
        machine.lazy_starts,
        machine.lookahead,
        machine.advance_running,
        machine.within,
        machine.equivalence_key is None,
        trim_at,
    )


def _chain_to_list(chain) -> list[int]:
    out = []
    while chain is not None:
        out.append(chain[0])
        chain = chain[1]
    out.reverse()
    return out


def _list_to_chain(labels: list[int]):
    chain = None
    for label in labels:
        chain = (label, chain)
    return chain


def _marks_to_list(marks) -> list[list]:
    out = []
    while marks is not None:
        out.append([marks[0], marks[1]])
        marks = marks[2]
    out.reverse()
    return out


def _list_to_marks(items: list[list]):
    marks = None
    for position, is_begin in items:
        marks = (position, bool(is_begin), marks)
    return marks


def _excluded(marks) -> list[tuple[int, int]]:
    """Exclusion marks -> half-open row ranges [begin, end) hidden from ALL ROWS PER MATCH output."""
    if marks is None:
        return []
    ranges = []
    pending: list[int] = []
    for position, is_begin in _marks_to_list(marks):
        if is_begin:
            pending.append(position)
        elif pending:
            ranges.append((pending.pop(), position))
    return ranges

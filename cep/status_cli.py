"""``cep status`` and ``cep deliver``: what a stream is doing, and its dead letters, from its checkpoint.

    cep status --checkpoint ck/ [--json] [--stale-after 60s] [--max-batch-age 10m]
    cep deliver --checkpoint ck/ [--dead-letter DIR]                       list what waits, per sink
    cep deliver --checkpoint ck/ --sink webhook URL [--from SINK] [webhook options]   send it again

``cep status`` exits 0 when the stream runs, 1 when it is ``dead`` or ``failed``, 3 when it was stopped
(the LSB convention of ``service status``), 2 when there is no status to read. Liveness comes from the
driver's heartbeat and Spark's query status, never from the age of the last micro-batch: a stream idle on a
quiet topic is running. Dead: the status says running, but the process that wrote it is gone, its heartbeat
is older than ``--stale-after``, Spark's matching query is not active, or a micro-batch has run longer than
``--max-batch-age`` (stuck).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import socket
import sys
import time

from cep import cli_io
from cep.cli_io import UsageError
from cep.spark_bridge.alerting.driver_state import LAYOUT_NAMES, SPARK
from cep.spark_bridge.alerting.status import epoch_seconds, read_status, rule_rows
from cep.spark_bridge.engine.durations import is_off, parse_duration
from cep.spark_bridge.sinks.dead_letters import DeadLetterBox
from cep.spark_bridge.sinks.lanes import Journal, Outbox, redelivered_name
from cep.spark_bridge.sinks.payloads import FORMATS as WEBHOOK_FORMATS
from cep.spark_bridge.sinks.safe_text import visible
from cep.stream_cli import parse_sinks

__all__ = ["add_commands", "cmd_deliver", "cmd_status", "liveness", "render_status"]

EXIT_DEAD = 1
EXIT_STOPPED = 3
DEFAULT_STALE_AFTER = "60s"  # the stream rewrites its status about every second
DEFAULT_MAX_BATCH_AGE = "10m"  # Spark reports a trigger at least every 10 s, idle ones included


def add_commands(subparsers) -> None:
    """Add ``status`` and ``deliver`` to the ``cep`` command's subparsers."""
    status = subparsers.add_parser(
        "status",
        help="show a stream's state, rules, sinks and errors; exit 1 when it is dead",
        description="Print what the stream using --checkpoint DIR last reported: whether it runs (or is dead: its "
        "process gone, or silent), per rule its version, matches, suppressed, live partial matches, late rows and "
        "errors, per sink its deliveries, queue and dead letters. Exit code: 0 running, 1 dead or failed, "
        "3 stopped, 2 no status.",
    )
    status.add_argument("--checkpoint", "-c", required=True, metavar="DIR", help="the stream's checkpoint directory")
    status.add_argument("--json", action="store_true", help="print the status file as JSON (with the liveness verdict)")
    status.add_argument(
        "--stale-after",
        default=DEFAULT_STALE_AFTER,
        metavar="DURATION",
        help="a running stream whose heartbeat is older than this is dead (default: %(default)s)",
    )
    status.add_argument(
        "--max-batch-age",
        default=DEFAULT_MAX_BATCH_AGE,
        metavar="DURATION",
        help="... or whose micro-batch has run longer than this: stuck ('off': never; "
        "default: %(default)s); a stream idle on a quiet topic is running",
    )
    status.set_defaults(func=cmd_status)

    deliver = subparsers.add_parser(
        "deliver",
        help="list a stream's dead letters and queued alerts, or send the dead letters again",
        description="Without --sink: list, per sink, the dead letters (requests that failed after their retries, "
        "kept with every error) and the micro-batches waiting in its outbox. With --sink webhook URL: send every "
        "dead letter of that webhook once (those the receiver refused too), remove those delivered, and record "
        "them for the stream's counts. Safe while the stream runs (one redelivery at a time per sink).",
    )
    deliver.add_argument("--checkpoint", "-c", required=True, metavar="DIR", help="the stream's checkpoint directory")
    deliver.add_argument(
        "--dead-letter", metavar="DIR", help="the stream's --dead-letter (default: CHECKPOINT/dead-letter)"
    )
    deliver.add_argument("--sink", nargs=2, metavar=("webhook", "URL"), help="send the dead letters of this webhook")
    deliver.add_argument(
        "--from",
        dest="from_sink",
        metavar="SINK",
        help="send the letters of another sink folder (its key, as listed) to --sink (a receiver that moved)",
    )
    deliver.add_argument("--webhook-format", choices=WEBHOOK_FORMATS, default=None)
    deliver.add_argument("--webhook-template", metavar="FILE")
    deliver.add_argument("--pagerduty-routing-key", metavar="KEY")
    deliver.add_argument("--webhook-header", action="append", metavar="'NAME: VALUE'")
    deliver.add_argument("--webhook-secret", metavar="SECRET")
    deliver.add_argument("--webhook-timeout", type=float, default=10.0, metavar="SECONDS")
    deliver.set_defaults(func=cmd_deliver, webhook_attempts=1, webhook_batch=1)


# -------------------------------------------------------------------------------------- cep status


def _ago(text: str | None) -> str:
    moment = epoch_seconds(text)
    if moment is None:
        return "never" if not text else str(text)
    stamp = _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    seconds = int(time.time() - moment)
    if seconds < 120:
        return f"{stamp}Z ({seconds}s ago)"
    if seconds < 7200:
        return f"{stamp}Z ({seconds // 60} min ago)"
    return f"{stamp}Z ({seconds // 3600} h ago)"


def _process_gone(status: dict) -> bool:
    """The recorded process is not running on this machine (False when it ran elsewhere: unknown)."""
    pid, host = status.get("pid"), status.get("host")
    if not pid or host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        return False
    return False


def liveness(
    status: dict, *, stale_after: float, max_batch_age: float | None, now: float | None = None
) -> tuple[str, str]:
    """(state, why): ``running``, ``dead``, ``failed``, ``stopped`` (or what the file says)."""
    now = time.time() if now is None else now
    state = status.get("state", "unknown")
    if state != "running":
        return state, ""
    if _process_gone(status):
        return "dead", f"its process {status.get('pid')} is gone (killed, or the machine restarted)"
    beat = epoch_seconds(status.get("heartbeat_at") or status.get("updated_at"))
    if beat is None or now - beat > stale_after:
        return "dead", f"no heartbeat for {int(now - beat) if beat else '?'}s (more than {stale_after:g}s)"
    query = status.get("spark_query")
    if query is None:  # written before the stream recorded Spark's query status: the last trigger is all there is
        last = epoch_seconds(status.get("last_progress_at"))
        started = epoch_seconds(status.get("started_at")) or beat
        if max_batch_age is not None and now - (last or started) > max_batch_age:
            why = (
                f"Spark's last trigger was {int(now - last)}s ago"
                if last
                else f"no micro-batch since the start, {int(now - started)}s ago"
            )
            return "dead", f"{why} (more than {max_batch_age:g}s)"
        return "running", ""
    if not query.get("active"):
        return "dead", "Spark's matching query is not active"
    since = epoch_seconds(query.get("trigger_since"))
    if query.get("trigger_active") and since is not None and max_batch_age is not None and now - since > max_batch_age:
        return "dead", f"a micro-batch has been running for {int(now - since)}s (more than {max_batch_age:g}s)"
    if query.get("waiting_for_data"):
        last = epoch_seconds(status.get("last_progress_at"))
        return "running", "idle: no new input" + (f" since the micro-batch {int(now - last)}s ago" if last else "")
    return "running", ""


def render_status(status: dict, verdict: tuple[str, str] | None = None) -> str:
    lines = _stream_lines(status, verdict)
    for key, sink in sorted((status.get("sinks") or {}).items()):
        lines.extend(_sink_lines(key, sink))
    bad = status.get("bad_rows") or {}
    if sum(bad.values()):
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(bad.items()) if count)
        lines.append(f"bad rows: {sum(bad.values())} ({reasons}) -> {status.get('bad_rows_path', '-')}")
    if status.get("late_rows"):
        lines.append(
            f"late rows: {status['late_rows']} input rows late for at least one rule "
            f"-> {status.get('late_rows_path', '-')}"
        )
    rows = rule_rows(status)
    duplicates = max((r["duplicates_dropped"] for r in rows), default=0)
    if duplicates:
        lines.append(f"duplicates dropped: {duplicates} (each rule drops the repeats it sees; the largest count)")
    lines.append("")
    lines.extend(_rule_table(rows))
    lines.extend(_error_and_event_lines(status, rows))
    return "\n".join(lines)


def _stream_lines(status: dict, verdict: tuple[str, str] | None) -> list[str]:
    """The stream's state, its last micro-batch, its input and output, and damaged files or rules."""
    lines = []
    last = status.get("last_batch") or {}
    state, why = verdict or (status.get("state", "?"), "")
    lines.append(
        f"stream: {state}{f' ({why})' if why else ''}, status written {_ago(status.get('updated_at'))}"
        + (f", pid {status.get('pid')} on {status.get('host')}" if status.get("pid") else "")
    )
    if last:
        duration = f", {last['duration_ms']} ms" if last.get("duration_ms") is not None else ""
        lines.append(
            f"last micro-batch: {last.get('id')} at {_ago(last.get('time'))}, {last.get('input_rows', 0)} input rows"
            f"{duration}; watermark {last.get('watermark') or '-'}"
        )
    lines.append(
        f"event time: {status.get('time_column') or '-'}; "
        f"matches: {status.get('output', '-')} ({status.get('output_format', '-')})"
    )
    layout = status.get("layout") or {}
    if layout.get("state") in LAYOUT_NAMES:  # where the rules run and keep their state, and why (choose_layout)
        buckets = (
            f", {status['key_buckets']} key buckets" if layout["state"] == SPARK and status.get("key_buckets") else ""
        )
        lines.append(
            f"state: {LAYOUT_NAMES[layout['state']]} (--state {layout['state']}{buckets}): {layout.get('why')}; "
            f"{layout.get('other')}"
        )
    if status.get("damaged_status"):
        lines.append(f"STATUS FILE DAMAGED: {status['damaged_status']}")
    for damage in (status.get("damaged") or [])[-5:]:
        lines.append(f"damaged file set aside {_ago(damage.get('time'))}: {visible(str(damage.get('message')))}")
    if status.get("rules_outage"):
        outage = status["rules_outage"]
        lines.append(
            f"RULES UNREADABLE since {_ago(outage.get('since'))}: {outage.get('error')}; "
            "the last good rule set keeps running"
        )
    return lines


def _sink_lines(key: str, sink: dict) -> list[str]:
    """One sink's deliveries, its queue and dead letters, and its recent errors."""
    lines = []
    extra = []
    if sink.get("queue_alerts"):
        extra.append(f"{sink['queue_alerts']} alerts waiting ({sink.get('queue_batches', 0)} micro-batches)")
    if sink.get("failing_since"):
        extra.append(f"FAILING since {_ago(sink['failing_since'])}: {sink.get('last_error')}")
    waiting = sink.get("dead_letters_waiting", 0)
    letters = (
        f", dead letters waiting {waiting}"
        + (f" ({sink.get('dead_letters_refused', 0)} refused: cep deliver)" if sink.get("dead_letters_refused") else "")
        if waiting
        else ""
    )
    if sink.get("damaged_files"):
        damaged = sink["damaged_files"]
        extra.append(f"{len(damaged)} damaged file(s) set aside ({', '.join(damaged[-3:])})")
    lines.append(
        f"sink {sink.get('label') or key}: delivered {sink.get('delivered', 0)}, dead-lettered "
        f"{sink.get('dead_lettered', 0)}, redelivered {sink.get('redelivered', 0)}, "
        f"retries {sink.get('retries', 0)}"
        f"{letters}" + (f"; {'; '.join(extra)}" if extra else "")
    )
    for error in sink.get("errors", [])[-3:]:
        lines.append(
            f"  {_ago(error.get('time'))}: {visible(str(error.get('message')))} (listed until {error.get('expires')})"
        )
    if not sink.get("errors") and sink.get("last_error"):
        lines.append(
            f"  last error {_ago(sink.get('last_error_at'))}: {visible(str(sink['last_error']))} (recovered since)"
        )
    return lines


def _rule_table(rows: list[dict]) -> list[str]:
    """The table of rules: state, version, counts and the last micro-batch of each."""
    lines = []
    header = ("RULE", "STATE", "VERSION", "MATCHES", "SUPPRESSED", "LIVE", "LATE", "LAST MICRO-BATCH", "ERRORS")
    table = [header]
    for r in rows:
        live = str(r["live"]) + (f" (+{r['stale_live']} old)" if r["stale_live"] else "")
        matches = str(r["matches"]) + (f" (+{r['earlier_matches']} earlier versions)" if r["earlier_matches"] else "")
        table.append(
            (
                r["rule"],
                r["state"],
                r["version"],
                matches,
                str(r["suppressed"]),
                live,
                str(r["late"]),
                _ago(r["last_batch_time"]).split(" (")[0] if r["last_batch_time"] else "-",
                str(len(r["errors"])) if r["errors"] else "-",
            )
        )
    if len(table) == 1:
        lines.append("(no rules)")
    else:
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        numeric = {4, 6}
        for row in table:
            lines.append(
                "  ".join(
                    cell.rjust(w) if i in numeric and row is not header else cell.ljust(w)
                    for i, (cell, w) in enumerate(zip(row, widths))
                ).rstrip()
            )
    return lines


def _error_and_event_lines(status: dict, rows: list[dict]) -> list[str]:
    """The rules' errors, the recent events and the last query errors."""
    lines = []
    problems = [(r["rule"], e) for r in rows for e in r["errors"]]
    loose = [e.get("rendered", "") for e in status.get("errors", []) if not e.get("rule_id")]
    if problems or loose:
        lines.append("")
        lines.append("errors:")
        for rule, error in problems:
            lines.append(f"  {rule}: " + str(error).replace("\n", "\n    "))
        for error in loose:
            lines.append("  " + error.replace("\n", "\n    "))
    events = status.get("events") or []
    if events:
        lines.append("")
        lines.append("recent events:")
        for event in events[-8:]:
            level = event.get("level", "info")
            prefix = "" if level == "info" else level + ": "
            lines.append(f"  {event.get('time', '')}  {prefix}{event.get('message', '')}".replace("\n", "\n    "))
    for error in (status.get("query_errors") or [])[-3:]:
        first_line = str(error.get("error", "")).splitlines()[0] if error.get("error") else ""
        lines.append(f"query error at {error.get('time')}: {first_line}")
    return lines


def _seconds(value: str, option: str) -> float | None:
    if is_off(value):
        return None
    try:
        return parse_duration(value, what=option) / 1e6
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{option}: {exc}") from None


def cmd_status(args: argparse.Namespace) -> int:
    path = os.path.join(args.checkpoint, "status.json")
    if not os.path.exists(path):
        raise UsageError(
            f"no status in {args.checkpoint} (no cep stream has run with this --checkpoint): {path} not found"
        )
    try:
        status = read_status(args.checkpoint)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path} nor its backup: {exc}") from None
    verdict = liveness(
        status,
        stale_after=_seconds(args.stale_after, "--stale-after") or 60.0,
        max_batch_age=_seconds(args.max_batch_age, "--max-batch-age"),
    )
    if args.json:
        print(json.dumps({**status, "liveness": {"state": verdict[0], "why": verdict[1]}}, indent=1, sort_keys=True))
    else:
        print(render_status(status, verdict))
    return {"running": cli_io.EXIT_OK, "stopped": EXIT_STOPPED}.get(verdict[0], EXIT_DEAD)


# ------------------------------------------------------------------------------------- cep deliver


def _boxes(root: str) -> list[tuple[str, DeadLetterBox]]:
    if not os.path.isdir(root):
        return []
    return [
        (name, DeadLetterBox(os.path.join(root, name)))
        for name in sorted(os.listdir(root))
        if os.path.isdir(os.path.join(root, name))
        and name not in ("bad-rows", "late")
        and not name.startswith((".", "bad-rows."))
    ]


def cmd_deliver(args: argparse.Namespace) -> int:
    checkpoint = os.path.abspath(args.checkpoint)
    if not os.path.isdir(checkpoint):
        raise UsageError(f"no checkpoint directory {args.checkpoint}")
    root = os.path.abspath(args.dead_letter or os.path.join(checkpoint, "dead-letter"))
    if args.sink is None:
        return _list(checkpoint, root)
    kind, url = args.sink
    if kind.lower() != "webhook":
        raise UsageError("cep deliver sends dead letters to a webhook: --sink webhook URL")
    _, sinks = parse_sinks([["webhook", url]], dead_letter_dir=root, webhook_args=args)
    sink = sinks[0]
    box = sink.dead_letters if args.from_sink is None else DeadLetterBox(os.path.join(root, args.from_sink))
    box.on_damage = _say_damaged
    journal = Journal(os.path.join(checkpoint, "journal"))
    sent = failed = 0
    with box.lock():
        for letter in box.letters():
            attempt = sink.resend(letter)
            if attempt.ok:
                journal.write(
                    redelivered_name(sink.key(), letter.stamp),
                    {
                        "kind": "redeliver",
                        "sink": sink.key(),
                        "label": sink.describe(),
                        "letter": letter.path,
                        "stamp": letter.stamp,
                        "delivered": dict(letter.rules),
                        "time": None,
                    },
                )
                box.remove(letter)
                sent += 1
                print(f"delivered {letter.key} ({len(letter.alerts)} alert(s))")
            else:
                box.failed_again(letter, attempt.error, refused=attempt.refused)
                failed += 1
                print(f"still failing {letter.key}: {visible(attempt.error)}")
    print(f"{sink.describe()}: {sent} dead letter(s) delivered, {failed} still failing")
    return cli_io.EXIT_OK if not failed else cli_io.EXIT_QUERY_ERROR


def _say_damaged(message: str, path: str) -> None:
    print(f"warning: {visible(message)}", file=sys.stderr)


def _list(checkpoint: str, root: str) -> int:
    outbox = Outbox(os.path.join(checkpoint, "outbox"))
    found = False
    for name, box in _boxes(root):
        box.on_damage = _say_damaged
        letters = box.letters()
        for path in box.damaged():
            found = True
            print(f"{name}: damaged file set aside, kept for inspection: {path}")
        if not letters:
            continue
        found = True
        label = letters[0].sink_label or name
        refused = sum(1 for letter in letters if letter.refused)
        alerts = sum(len(letter.alerts) for letter in letters)
        print(f"{name} ({label}): {len(letters)} dead letter(s), {alerts} alert(s), {refused} refused by the receiver")
        for letter in letters[:20]:
            when = _dt.datetime.fromtimestamp(letter.first_failed_at, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
            rules = ", ".join(sorted(letter.rules))
            print(
                f"  {letter.key}  {when}  {letter.attempts} attempt(s)  {'refused' if letter.refused else 'waiting'}  "
                f"rules {rules}: {visible(letter.error)}"
            )
        if len(letters) > 20:
            print(f"  ... and {len(letters) - 20} more")
    for key in outbox.sinks():
        entries = outbox.entries(key)
        if entries:
            found = True
            print(
                f"{key}: {len(entries)} micro-batch(es), {sum(n for _, n in entries)} alert(s) waiting in the outbox "
                f"(delivered by the stream's lane once the sink takes them)"
            )
    if not found:
        print("nothing waits: no dead letter, no queued alert")
    return cli_io.EXIT_OK

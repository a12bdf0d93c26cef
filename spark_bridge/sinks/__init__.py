"""Where alerts go: files (Spark's exactly-once file sink), the console, an HTTP webhook, a SQL database.

Every alert is one row of ``alerts.ALERT_COLUMNS`` (``cep.spark_bridge.alerting.stream`` makes them):

    rule_id, rule_version, match_id, match_status, partition_key, first_event_time, last_event_time,
    measures, emit_time, suppressed

* ``FileSink(path, format)``: JSON lines, Parquet or CSV through Spark's file sink, with a checkpoint:
  each micro-batch is committed exactly once in ``path/_spark_metadata``. Read it back through Spark
  (``FileSink.read(spark)``), which honours that log; a killed batch can leave orphan part files that
  a plain directory listing would show. Every match is written, the suppressed ones too.
* Alert sinks, fed from ``foreachBatch`` (``deliver_batch``) with the alerts that are not suppressed,
  and idempotent by ``match_id`` so that a micro-batch replayed after a crash delivers nothing twice:

  - ``ConsoleSink()``: one readable line per alert.
  - ``WebhookSink(url, dead_letter_dir=...)``: HTTP POST of a JSON body ``{"alerts": [...]}``. By
    default one request per match, with the header ``Idempotency-Key: <match_id>``. With
    ``batch_size=N`` a request carries up to N alerts (sorted by match_id) and its key is
    ``batch-`` + the first 32 hex digits of the SHA-256 of their match ids joined by commas: the same
    alerts give the same key, and every alert in the body still carries its own ``match_id``.
    Failures (connection refused or reset, timeouts, HTTP 5xx, 408, 425, 429) are retried with the
    ``RetryPolicy`` every sink uses (``base.py``): wait ``RetryPolicy.delay(n)`` = ``backoff`` * 2^n,
    at most ``max_backoff`` (``Retry-After`` is honoured within that), at most ``max_attempts`` times
    per request and within ``budget`` (``retry_budget``) seconds per micro-batch.
    Other 4xx answers are not retried. A request that still failed is written, with its body, every
    error and the attempt count, to ``dead_letter_dir/<key>.json``: never dropped.
    ``WebhookSink.replay_dead_letters()`` sends them again (and removes those that went through).
  - ``SQLiteSink(path)`` (stdlib ``sqlite3``) and ``PostgresSink(url)`` (``psycopg`` 3, or ``psycopg2``):
    ``INSERT ... ON CONFLICT (match_id) DO UPDATE``: one row per match, however often a batch is
    delivered. A locked database (or a lost connection) is retried with backoff within a
    ``RetryPolicy``; then, like any other error, the sink raises ``CepSinkError`` naming itself.

A sink that cannot take a micro-batch raises ``CepSinkError`` (E0470): the micro-batch is then not
committed, and Spark delivers it again when the stream restarts from its checkpoint; upserts and
idempotency keys make that second delivery harmless. A database is not dead-lettered: the input's
offsets in the checkpoint already are a durable queue of what it missed, replayed in order, whereas a
dead-letter file would split the record of alerts in two and need a replay tool. Every file written
here (dead letters) goes to a temporary name, is fsynced, then renamed: a reader never sees half a file.

pyspark is imported only where a Spark object is handled.

The modules: ``alerts`` (the alert row and its JSON), ``base`` (what every sink shares), ``file``,
``console``, ``webhook``, ``sql`` (one per kind of sink), ``fanout`` (one micro-batch to every sink, and
``make_sink`` for ``cep stream --sink``). A new sink is a module here with an ``AlertSink`` subclass and a
line in ``make_sink``.
"""

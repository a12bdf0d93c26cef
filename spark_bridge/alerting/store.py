"""Where the driver publishes rule sets and every micro-batch is pinned to one (see ``RuleStore``)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid

from cep.spark_bridge.sinks.base import atomic_write


class RuleStore:
    """Rule sets published by the driver and the set each micro-batch runs with (see the module doc).

    ``<dir>/sets/<id>.json``  an immutable rule set (id: hash of its content)
    ``<dir>/current``         the id of the set new micro-batches take
    ``<dir>/batches/<n>``     the id of the set micro-batch n ran with (created once, by its first task)

    The directory must be readable and writable at the same path by the driver and every executor
    (a local path in local mode; a shared file system on a cluster).
    """

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.sets_dir = os.path.join(self.directory, "sets")
        self.batches_dir = os.path.join(self.directory, "batches")
        self.current_path = os.path.join(self.directory, "current")
        self._sets: dict[str, dict] = {}

    def publish(self, payload: dict) -> str:
        os.makedirs(self.sets_dir, exist_ok=True)
        os.makedirs(self.batches_dir, exist_ok=True)
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        set_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = os.path.join(self.sets_dir, f"{set_id}.json")
        if not os.path.exists(path):
            atomic_write(path, text)
        if self.current_id() != set_id:
            atomic_write(self.current_path, set_id)
        return set_id

    def current_id(self) -> str | None:
        try:
            with open(self.current_path, encoding="utf-8") as fh:
                return fh.read().strip() or None
        except FileNotFoundError:
            return None

    def load(self, set_id: str) -> dict:
        found = self._sets.get(set_id)
        if found is None:
            with open(os.path.join(self.sets_dir, f"{set_id}.json"), encoding="utf-8") as fh:
                found = self._sets[set_id] = json.load(fh)
        return found

    def set_for_batch(self, batch_id: int | str | None) -> str:
        """The set micro-batch ``batch_id`` runs with, fixed by whoever asks first."""
        if batch_id is None:
            current = self.current_id()
            if current is None:
                raise RuntimeError(f"no rule set published in {self.directory}")
            return current
        path = os.path.join(self.batches_dir, str(int(batch_id)))
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except FileNotFoundError:
            pass
        current = self.current_id()
        if current is None:
            raise RuntimeError(f"no rule set published in {self.directory}")
        os.makedirs(self.batches_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(current)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic and create-once: the first task of the batch decides
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()

    def batch_sets(self) -> dict[int, str]:
        if not os.path.isdir(self.batches_dir):
            return {}
        out = {}
        for name in os.listdir(self.batches_dir):
            if name.isdigit():
                with open(os.path.join(self.batches_dir, name), encoding="utf-8") as fh:
                    out[int(name)] = fh.read().strip()
        return out

    def prune(self, keep: int = 200) -> None:
        """Forget the sets of all but the last ``keep`` micro-batches (Spark re-runs at most the last one)."""
        batches = sorted(self.batch_sets())
        for batch in batches[:-keep] if len(batches) > keep else []:
            try:
                os.remove(os.path.join(self.batches_dir, str(batch)))
            except FileNotFoundError:
                pass

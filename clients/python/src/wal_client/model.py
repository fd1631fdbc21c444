"""What a caller passes and gets back."""

import enum
from dataclasses import dataclass


class Outcome(enum.Enum):
    """The durable answer to a write (the proto's Trilean)."""

    TRUE = "TRUE"  # on the namespace's queue; delivered at least once
    FALSE = "FALSE"  # this call definitely stored nothing; the caller decides whether to retry
    UNKNOWN = "UNKNOWN"  # may or may not be stored; returned only when the deadline ended first


@dataclass(frozen=True)
class WriteResult:
    """The answer to a write, a transaction or a commit.

    `entry_id` is the entry's id (the idempotency id; for a commit, the commit marker's id),
    `attempts` how many attempts it took (at least 1), `message` the producer's explanation
    when the outcome is not TRUE, `destinations` (when the write awaited them and was stored)
    each destination's name and what it had done: "applied", "dead_lettered" or "pending"."""

    outcome: Outcome
    entry_id: str
    attempts: int
    message: str = ""
    destinations: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return self.outcome is Outcome.TRUE


@dataclass(frozen=True)
class Target:
    """Where to deliver an entry: a target kind ("cql", "cache", "kafka", "http", "region") and
    its settings as a JSON object. Unset on a write: the namespace's default target."""

    kind: str
    settings_json: str = "{}"


@dataclass(frozen=True)
class Item:
    """One item of a two-phase transaction. `target` unset: the namespace's default target."""

    payload: bytes
    target: Target | None = None

"""A client's settings; the defaults are BEHAVIOUR.md's table."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Times are in seconds."""

    deadline: float = 10.0  # a call's deadline when the caller gives none
    backoff_initial: float = 0.05  # the first backoff step; each wait is random in [0, step)
    backoff_max: float = 2.0  # the step doubles up to this
    batching: bool = True  # concurrent writes share WriteToLogBatch calls
    linger: float = 0.001  # how long a batch's first write waits for others
    max_batch: int = 500  # writes per batch at most (the producer takes 1000)
    max_batches_in_flight: int = 1  # 1 keeps writes of one key in order on the queue
    producer_pause: float = 1.0  # a producer that failed in transport is skipped this long...
    producer_max_pause: float = 30.0  # ...doubling up to this while it keeps failing
    transaction_chunk: int = 100  # items per AppendItems call of the two-phase helper
    channel_options: tuple[tuple[str, object], ...] = ()  # passed to every gRPC channel

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= 1000:
            raise ValueError("max_batch must be 1 to 1000 (the producer's limit per call)")
        if self.max_batches_in_flight < 1 or self.transaction_chunk < 1:
            raise ValueError("max_batches_in_flight and transaction_chunk must be at least 1")


@dataclass(frozen=True)
class Tls:
    """mTLS: the CA that signed the producers' certificates, the client's certificate chain and
    key (PEM), and the name to expect on the producers' certificates when it is not the host of
    the address (an IP address, say)."""

    ca: bytes
    cert: bytes
    key: bytes
    server_name: str | None = None

    @classmethod
    def from_files(
        cls,
        ca: str | Path,
        cert: str | Path,
        key: str | Path,
        server_name: str | None = None,
    ) -> "Tls":
        return cls(Path(ca).read_bytes(), Path(cert).read_bytes(), Path(key).read_bytes(), server_name)

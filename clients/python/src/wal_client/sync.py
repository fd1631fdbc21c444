"""A blocking client for code without an event loop: the asyncio client on a loop of its own
in a background thread. Calls from many threads at once share its batches."""

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from .client import Client
from .model import WriteResult
from .settings import Settings, Tls

T = TypeVar("T")


class SyncClient:
    """The same calls as `Client`, blocking: ``with SyncClient(addrs) as client:
    client.write("pds", b"...")``. Keyword arguments are `Client`'s."""

    def __init__(
        self,
        producers: Sequence[str] | str,
        *,
        settings: Settings | None = None,
        tls: Tls | None = None,
        **overrides: Any,
    ) -> None:
        self._client = Client(producers, settings=settings, tls=tls, **overrides)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="wal-client", daemon=True)
        self._thread.start()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def write(self, namespace: str, payload: bytes | str, **kwargs: Any) -> WriteResult:
        return self._call(self._client.write(namespace, payload, **kwargs))

    def transaction(self, namespace: str, transaction_id: str, items: Any, **kwargs: Any) -> WriteResult:
        return self._call(self._client.transaction(namespace, transaction_id, list(items), **kwargs))

    def commit(self, namespace: str, transaction_id: str, item_count: int, **kwargs: Any) -> WriteResult:
        return self._call(self._client.commit(namespace, transaction_id, item_count, **kwargs))

    def abort(self, namespace: str, transaction_id: str, **kwargs: Any) -> None:
        self._call(self._client.abort(namespace, transaction_id, **kwargs))

    def close(self) -> None:
        """Closes the client (sending what is queued), then stops its thread."""
        if not self._loop.is_running():
            return
        self._call(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _call(self, call: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

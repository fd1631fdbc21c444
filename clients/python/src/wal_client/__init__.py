"""Client library for the WAL platform's WriteToLog API (see README.md and clients/BEHAVIOUR.md).

    async with wal_client.Client(["127.0.0.1:50051"]) as client:
        result = await client.write("pds", b"...", key="objects/7")
"""

from .client import Client
from .errors import DeadlineExceeded, Refused, WalError
from .model import Item, Outcome, Target, WriteResult
from .settings import Settings, Tls
from .sync import SyncClient

__all__ = [
    "Client",
    "DeadlineExceeded",
    "Item",
    "Outcome",
    "Refused",
    "Settings",
    "SyncClient",
    "Target",
    "Tls",
    "WalError",
    "WriteResult",
]

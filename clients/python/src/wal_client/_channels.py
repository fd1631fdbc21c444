"""The channel to one producer, plain or mutual TLS, and the stubs of both services on it."""

from dataclasses import dataclass

import grpc

from ._proto.wal.v1 import transaction_pb2_grpc, write_pb2_grpc
from .settings import Settings, Tls


@dataclass
class Endpoint:
    """One producer: its channel and the stubs of both services on it."""

    address: str
    channel: grpc.aio.Channel
    write: write_pb2_grpc.WriteAheadLogStub
    transactions: transaction_pb2_grpc.TransactionsStub


def open_endpoint(address: str, settings: Settings, tls: Tls | None) -> Endpoint:
    """A channel to `address`; grpc.aio channels belong to the loop running when they are made."""
    options = list(settings.channel_options)
    if tls is None:
        channel = grpc.aio.insecure_channel(address, options=options)
    else:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=tls.ca,
            private_key=tls.key,
            certificate_chain=tls.cert,
        )
        if tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
        channel = grpc.aio.secure_channel(address, credentials, options=options)
    return Endpoint(
        address,
        channel,
        write_pb2_grpc.WriteAheadLogStub(channel),
        transaction_pb2_grpc.TransactionsStub(channel),
    )

from . import target_pb2 as _target_pb2
from . import write_pb2 as _write_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransactionItem(_message.Message):
    __slots__ = ("sequence", "target", "payload")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    target: _target_pb2.Target
    payload: bytes
    def __init__(self, sequence: _Optional[int] = ..., target: _Optional[_Union[_target_pb2.Target, _Mapping]] = ..., payload: _Optional[bytes] = ...) -> None: ...

class AppendItemsRequest(_message.Message):
    __slots__ = ("namespace", "transaction_id", "items")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    transaction_id: str
    items: _containers.RepeatedCompositeFieldContainer[TransactionItem]
    def __init__(self, namespace: _Optional[str] = ..., transaction_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[TransactionItem, _Mapping]]] = ...) -> None: ...

class AppendItemsResponse(_message.Message):
    __slots__ = ("staged", "unchanged")
    STAGED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    staged: int
    unchanged: int
    def __init__(self, staged: _Optional[int] = ..., unchanged: _Optional[int] = ...) -> None: ...

class CommitTransactionRequest(_message.Message):
    __slots__ = ("namespace", "transaction_id", "item_count")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_COUNT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    transaction_id: str
    item_count: int
    def __init__(self, namespace: _Optional[str] = ..., transaction_id: _Optional[str] = ..., item_count: _Optional[int] = ...) -> None: ...

class WriteTransactionRequest(_message.Message):
    __slots__ = ("namespace", "transaction_id", "items")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    transaction_id: str
    items: _containers.RepeatedCompositeFieldContainer[TransactionItem]
    def __init__(self, namespace: _Optional[str] = ..., transaction_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[TransactionItem, _Mapping]]] = ...) -> None: ...

class AbortTransactionRequest(_message.Message):
    __slots__ = ("namespace", "transaction_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    transaction_id: str
    def __init__(self, namespace: _Optional[str] = ..., transaction_id: _Optional[str] = ...) -> None: ...

class AbortTransactionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

from . import target_pb2 as _target_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Trilean(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRILEAN_UNSPECIFIED: _ClassVar[Trilean]
    TRILEAN_TRUE: _ClassVar[Trilean]
    TRILEAN_FALSE: _ClassVar[Trilean]
    TRILEAN_UNKNOWN: _ClassVar[Trilean]

class DestinationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DESTINATION_STATE_UNSPECIFIED: _ClassVar[DestinationState]
    DESTINATION_STATE_APPLIED: _ClassVar[DestinationState]
    DESTINATION_STATE_DEAD_LETTERED: _ClassVar[DestinationState]
    DESTINATION_STATE_PENDING: _ClassVar[DestinationState]
TRILEAN_UNSPECIFIED: Trilean
TRILEAN_TRUE: Trilean
TRILEAN_FALSE: Trilean
TRILEAN_UNKNOWN: Trilean
DESTINATION_STATE_UNSPECIFIED: DestinationState
DESTINATION_STATE_APPLIED: DestinationState
DESTINATION_STATE_DEAD_LETTERED: DestinationState
DESTINATION_STATE_PENDING: DestinationState

class WriteToLogBatchRequest(_message.Message):
    __slots__ = ("writes",)
    WRITES_FIELD_NUMBER: _ClassVar[int]
    writes: _containers.RepeatedCompositeFieldContainer[WriteToLogRequest]
    def __init__(self, writes: _Optional[_Iterable[_Union[WriteToLogRequest, _Mapping]]] = ...) -> None: ...

class WriteToLogBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WriteResult]
    def __init__(self, results: _Optional[_Iterable[_Union[WriteResult, _Mapping]]] = ...) -> None: ...

class WriteResult(_message.Message):
    __slots__ = ("code", "error", "response", "field", "retry_after_millis")
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MILLIS_FIELD_NUMBER: _ClassVar[int]
    code: int
    error: str
    response: WriteToLogResponse
    field: str
    retry_after_millis: int
    def __init__(self, code: _Optional[int] = ..., error: _Optional[str] = ..., response: _Optional[_Union[WriteToLogResponse, _Mapping]] = ..., field: _Optional[str] = ..., retry_after_millis: _Optional[int] = ...) -> None: ...

class WriteToLogRequest(_message.Message):
    __slots__ = ("namespace", "lifecycle", "payload", "target", "idempotency_id", "key", "await_destinations_millis")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    AWAIT_DESTINATIONS_MILLIS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    lifecycle: Lifecycle
    payload: bytes
    target: _target_pb2.Target
    idempotency_id: str
    key: str
    await_destinations_millis: int
    def __init__(self, namespace: _Optional[str] = ..., lifecycle: _Optional[_Union[Lifecycle, _Mapping]] = ..., payload: _Optional[bytes] = ..., target: _Optional[_Union[_target_pb2.Target, _Mapping]] = ..., idempotency_id: _Optional[str] = ..., key: _Optional[str] = ..., await_destinations_millis: _Optional[int] = ...) -> None: ...

class Lifecycle(_message.Message):
    __slots__ = ("delay_millis", "jitter_millis", "original_write_time_micros")
    DELAY_MILLIS_FIELD_NUMBER: _ClassVar[int]
    JITTER_MILLIS_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_WRITE_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    delay_millis: int
    jitter_millis: int
    original_write_time_micros: int
    def __init__(self, delay_millis: _Optional[int] = ..., jitter_millis: _Optional[int] = ..., original_write_time_micros: _Optional[int] = ...) -> None: ...

class WriteToLogResponse(_message.Message):
    __slots__ = ("durable", "message", "entry_id", "destinations")
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    DESTINATIONS_FIELD_NUMBER: _ClassVar[int]
    durable: Trilean
    message: str
    entry_id: str
    destinations: _containers.RepeatedCompositeFieldContainer[DestinationOutcome]
    def __init__(self, durable: _Optional[_Union[Trilean, str]] = ..., message: _Optional[str] = ..., entry_id: _Optional[str] = ..., destinations: _Optional[_Iterable[_Union[DestinationOutcome, _Mapping]]] = ...) -> None: ...

class DestinationOutcome(_message.Message):
    __slots__ = ("destination", "state")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    destination: str
    state: DestinationState
    def __init__(self, destination: _Optional[str] = ..., state: _Optional[_Union[DestinationState, str]] = ...) -> None: ...

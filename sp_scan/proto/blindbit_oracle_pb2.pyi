from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InfoResponse(_message.Message):
    __slots__ = ("network", "height", "tweaks_only", "tweaks_full_basic", "tweaks_full_with_dust_filter", "tweaks_cut_through_with_dust_filter")
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    TWEAKS_ONLY_FIELD_NUMBER: _ClassVar[int]
    TWEAKS_FULL_BASIC_FIELD_NUMBER: _ClassVar[int]
    TWEAKS_FULL_WITH_DUST_FILTER_FIELD_NUMBER: _ClassVar[int]
    TWEAKS_CUT_THROUGH_WITH_DUST_FILTER_FIELD_NUMBER: _ClassVar[int]
    network: str
    height: int
    tweaks_only: bool
    tweaks_full_basic: bool
    tweaks_full_with_dust_filter: bool
    tweaks_cut_through_with_dust_filter: bool
    def __init__(self, network: _Optional[str] = ..., height: _Optional[int] = ..., tweaks_only: _Optional[bool] = ..., tweaks_full_basic: _Optional[bool] = ..., tweaks_full_with_dust_filter: _Optional[bool] = ..., tweaks_cut_through_with_dust_filter: _Optional[bool] = ...) -> None: ...

class BlockIdentifier(_message.Message):
    __slots__ = ("block_hash", "block_height")
    BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    BLOCK_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    block_hash: bytes
    block_height: int
    def __init__(self, block_hash: _Optional[bytes] = ..., block_height: _Optional[int] = ...) -> None: ...

class BlockHeightRequest(_message.Message):
    __slots__ = ("block_height",)
    BLOCK_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    block_height: int
    def __init__(self, block_height: _Optional[int] = ...) -> None: ...

class BlockHeightResponse(_message.Message):
    __slots__ = ("block_height",)
    BLOCK_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    block_height: int
    def __init__(self, block_height: _Optional[int] = ...) -> None: ...

class BlockHashResponse(_message.Message):
    __slots__ = ("block_hash",)
    BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    block_hash: bytes
    def __init__(self, block_hash: _Optional[bytes] = ...) -> None: ...

class IndexResponse(_message.Message):
    __slots__ = ("block_identifier", "index")
    BLOCK_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    block_identifier: BlockIdentifier
    index: bytes
    def __init__(self, block_identifier: _Optional[_Union[BlockIdentifier, _Mapping]] = ..., index: _Optional[bytes] = ...) -> None: ...

class UTXOItem(_message.Message):
    __slots__ = ("txid", "vout", "amount", "pubkey")
    TXID_FIELD_NUMBER: _ClassVar[int]
    VOUT_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    PUBKEY_FIELD_NUMBER: _ClassVar[int]
    txid: bytes
    vout: int
    amount: int
    pubkey: bytes
    def __init__(self, txid: _Optional[bytes] = ..., vout: _Optional[int] = ..., amount: _Optional[int] = ..., pubkey: _Optional[bytes] = ...) -> None: ...

class UTXOItemLight(_message.Message):
    __slots__ = ("vout", "amount", "pubkey")
    VOUT_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    PUBKEY_FIELD_NUMBER: _ClassVar[int]
    vout: int
    amount: int
    pubkey: bytes
    def __init__(self, vout: _Optional[int] = ..., amount: _Optional[int] = ..., pubkey: _Optional[bytes] = ...) -> None: ...

class BlockScanDataShortResponse(_message.Message):
    __slots__ = ("block_identifier", "comp_index", "spent_outputs")
    BLOCK_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    COMP_INDEX_FIELD_NUMBER: _ClassVar[int]
    SPENT_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    block_identifier: BlockIdentifier
    comp_index: _containers.RepeatedCompositeFieldContainer[ComputeIndexTxItem]
    spent_outputs: bytes
    def __init__(self, block_identifier: _Optional[_Union[BlockIdentifier, _Mapping]] = ..., comp_index: _Optional[_Iterable[_Union[ComputeIndexTxItem, _Mapping]]] = ..., spent_outputs: _Optional[bytes] = ...) -> None: ...

class ComputeIndexResponse(_message.Message):
    __slots__ = ("block_identifier", "index")
    BLOCK_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    block_identifier: BlockIdentifier
    index: _containers.RepeatedCompositeFieldContainer[ComputeIndexTxItem]
    def __init__(self, block_identifier: _Optional[_Union[BlockIdentifier, _Mapping]] = ..., index: _Optional[_Iterable[_Union[ComputeIndexTxItem, _Mapping]]] = ...) -> None: ...

class ComputeIndexTxItem(_message.Message):
    __slots__ = ("txid", "tweak", "outputs_short")
    TXID_FIELD_NUMBER: _ClassVar[int]
    TWEAK_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_SHORT_FIELD_NUMBER: _ClassVar[int]
    txid: bytes
    tweak: bytes
    outputs_short: bytes
    def __init__(self, txid: _Optional[bytes] = ..., tweak: _Optional[bytes] = ..., outputs_short: _Optional[bytes] = ...) -> None: ...

class FullTxItem(_message.Message):
    __slots__ = ("txid", "tweak", "inputs", "utxos")
    TXID_FIELD_NUMBER: _ClassVar[int]
    TWEAK_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    UTXOS_FIELD_NUMBER: _ClassVar[int]
    txid: bytes
    tweak: bytes
    inputs: bytes
    utxos: _containers.RepeatedCompositeFieldContainer[UTXOItemLight]
    def __init__(self, txid: _Optional[bytes] = ..., tweak: _Optional[bytes] = ..., inputs: _Optional[bytes] = ..., utxos: _Optional[_Iterable[_Union[UTXOItemLight, _Mapping]]] = ...) -> None: ...

class FullBlockResponse(_message.Message):
    __slots__ = ("block_identifier", "index")
    BLOCK_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    block_identifier: BlockIdentifier
    index: _containers.RepeatedCompositeFieldContainer[FullTxItem]
    def __init__(self, block_identifier: _Optional[_Union[BlockIdentifier, _Mapping]] = ..., index: _Optional[_Iterable[_Union[FullTxItem, _Mapping]]] = ...) -> None: ...

class RangedBlockHeightRequestFiltered(_message.Message):
    __slots__ = ("start", "end", "dustlimit", "cut_through")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    DUSTLIMIT_FIELD_NUMBER: _ClassVar[int]
    CUT_THROUGH_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    dustlimit: int
    cut_through: bool
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ..., dustlimit: _Optional[int] = ..., cut_through: _Optional[bool] = ...) -> None: ...

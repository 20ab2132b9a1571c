"""Typed errors: every failure sp-scan raises is an `SPError`.

Protocol outcomes are not errors: an ineligible input is `None`, a
transaction that is not a silent-payments transaction is `None`, no match
is `[]`. Errors are caller bugs and malformed data.
"""


class SPError(Exception):
    """Base of every error sp-scan raises."""


class InvalidKeyError(SPError, ValueError):
    """A key or scalar has the wrong width, is out of range, or is not a valid point."""


class ConfigError(SPError, ValueError):
    """An environment setting (SP_SCAN_BACKEND, SP_SCAN_SHA256, SP_SCAN_ECC) has a value sp-scan does not
    accept, or asks for an implementation this build or CPU cannot run."""


class InvalidAddressError(SPError, ValueError):
    """A silent-payments address does not decode under BIP352's rules."""


class MalformedDataError(SPError, ValueError):
    """Serialized data (hex, block, transaction, witness, spent outputs) does not parse."""


class MalformedBlockError(MalformedDataError):
    """A block is truncated, has trailing bytes, or does not parse."""


class PrevoutsError(SPError, ValueError):
    """The prevouts of a block are missing or do not match its inputs."""


class SendError(SPError, ValueError):
    """Outputs cannot be created for these inputs and recipients."""


class KeySumZeroError(SendError):
    """The eligible input private keys sum to zero (BIP352: sending fails)."""


class KmaxExceededError(SendError):
    """More than K_max = 2323 outputs for one scan key (BIP352: sending fails)."""


class SpendError(SPError, ValueError):
    """A wallet cannot build the spend asked for: not enough funds, an output below its dust threshold, a fee rate
    out of range, a coin it does not hold, or a transaction Core would not relay."""


class ServerError(SPError):
    """A server sp-scan reads (a Bitcoin Core node, a BlindBit or Electrum server) is unreachable, refuses the
    request, or answers with an error: what `sp_scan.retry.Retry` retries."""


class ServerConfigError(ServerError):
    """The server cannot be asked as configured (an RPC cookie file that was never readable): retrying cannot help."""


class IndexStoreError(SPError):
    """A tweak index file is missing, corrupt, of another format version or network, or busy."""


class WalletStoreError(SPError):
    """A wallet file is missing, corrupt, of another format version, busy, or does not match the keys given."""


class SourceError(SPError):
    """A wallet's source answers what its protocol does not allow: malformed, oversized, or contradicting
    itself or what the wallet already holds. Never retried; the wallet keeps what it committed before."""


class WrongNetworkError(SPError, ValueError):
    """A node or server is on another network than the wallet that would use it."""


class SourceURLError(SPError, ValueError):
    """A wallet source's or broadcaster's URL that sp-scan cannot use: an unknown scheme, no host or no port."""


class HeightError(SPError, LookupError):
    """A height the index (or the node it syncs from) does not have."""


class SchedulerAddressError(SPError, ValueError):
    """A Dask scheduler address that is malformed, or plaintext to a host that is not this machine."""


class ClusterError(SPError):
    """A Dask cluster cannot run a scan: no worker, a worker without sp-scan, or tasks lost with their workers."""


class PSBTError(MalformedDataError):
    """A PSBT breaks a rule of BIP174, BIP370 or BIP375.

    `rule` names the BIP375 check that failed ("psbt structure", "ecdh
    coverage", "input eligibility" or "output scripts"); the message starts
    with it.
    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule


class DescriptorError(SPError, ValueError):
    """An output script descriptor does not parse under BIP380, BIP392 or BIP393."""

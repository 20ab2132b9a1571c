"""The pure-Python reference: every stage written to be read, with the same signatures, results and
errors as the C stages of `sp_scan.native` (parity tests hold them to it). `sp_scan.backend` picks one.

Its Python integers are not constant-time: the reference is for reading and testing, the native
path for secrets in production.
"""

from . import block, dleq, extract, filters, scan, send, summary

__all__ = ["block", "dleq", "extract", "filters", "scan", "send", "summary"]

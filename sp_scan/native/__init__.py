"""The one door to sp-scan's C extensions (`_hash`, `_core`).

Only this module imports the compiled code. It converts arguments, checks
return codes and raises the typed errors of `sp_scan.errors`. Set
SP_SCAN_BACKEND=reference to use the pure-Python reference instead.
"""

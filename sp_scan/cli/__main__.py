"""`python -m sp_scan.cli`: the sp-scan command (how `sp-scan serve` starts the sync beside it)."""

from . import main

main()

"""Tools of this checkout, not of the installed package: the regeneration of results/ (the fork server
that results/reproduce.py trains through, the check that two regenerations agree) and the timing and
replay of that regeneration. Run them from the repository root (``python tools/NAME.py``)."""

"""``python -m forklift.cli``: the ``forklift`` command."""

from forklift.cli.main import main

main()

"""``python -m threadline``: the command line."""

from threadline.cli import main

main()

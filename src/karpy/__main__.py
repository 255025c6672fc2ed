"""``python -m karpy`` runs the command line."""

from karpy.cli import main

main()

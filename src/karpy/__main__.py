"""``python -m karpy`` runs the command line (through a running daemon, if any: :mod:`karpy.launch`)."""

from karpy.launch import main

main()

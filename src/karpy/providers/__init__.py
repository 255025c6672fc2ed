"""CloudProvider implementations: ``fake`` (tests) and ``kwok`` (Node objects, no VM)."""

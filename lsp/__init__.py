"""tabd LSP face: the pygls server, documents, positions and handlers. LSP types stop here."""

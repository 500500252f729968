"""What the tests share: the fixture model, the LSP client helpers and the fake backend."""

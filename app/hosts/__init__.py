"""One QThread per engine and the one job runner: each operation is one host method."""

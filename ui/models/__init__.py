"""The Models view: the library, models found on this machine, imports and downloads."""

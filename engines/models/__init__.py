"""Model folders: the manifest, the inside-the-folder rule, safety checks, the library, import, downloads, variants."""

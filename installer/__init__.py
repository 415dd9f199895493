"""Build tooling for the Windows MSI (not part of the installed app)."""

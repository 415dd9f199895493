"""The desktop window's wiring: links between views and hosts, shortcuts, placement, staged close."""

"""Widgets and state shared by the views: the placement chip, pickers, banners, theme, icons."""

"""What the app keeps: conversations (SQLite), benchmark history, settings; safe with several writers."""

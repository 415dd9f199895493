"""Chat: folder validation, the genai model, conversations, chat types."""

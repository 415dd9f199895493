"""The Chat view: conversations, the transcript, the composer and the model's status."""

"""Chat: the one chat service (service.py, opened where opening.py's rule says: local.py in this process,
bounded.py in the bounded engine child), its request and event types (requests.py), folder validation,
the genai model, conversations, and the chat types."""

"""Requests whose answers repeat their input, for tests/bench/bench_chat_speculative.py.

Each asks for a text or code back with a small change, as people ask a model to: the answer copies long runs of
the prompt, which prompt-lookup decoding drafts from the prompt itself. The last one is ordinary chat (little to
copy), to show what speculation costs where it rarely hits.
"""

from __future__ import annotations

PARAGRAPH = (
    "The library opens at nine in the morning and closes at six in the evening from Monday to Friday. On "
    "Saturdays it opens at ten and closes at four. Visitors can borrow up to five books at a time for three "
    "weeks, and they can renew each book twice online or at the front desk. Late returns cost twenty cents a "
    "day per book. The reading room on the second floor is quiet and has power outlets at every table."
)

CODE = '''def average_rating(reviews):
    total = 0
    count = 0
    for review in reviews:
        if review["rating"] is None:
            continue
        total = total + review["rating"]
        count = count + 1
    if count == 0:
        return 0
    return total / count


def best_reviews(reviews, limit):
    ranked = sorted(reviews, key=lambda review: review["rating"], reverse=True)
    return ranked[:limit]
'''

RECORD = (
    '{"name": "Ada Lovelace", "city": "London", "email": "ada@example.org", "languages": ["English", "French"], '
    '"member_since": 2019, "newsletter": true, "notes": "Prefers email; interested in the history of computing."}'
)

LIST = (
    "milk, eggs, flour, butter, sugar, baking powder, vanilla extract, salt, lemons, fresh strawberries, "
    "cream cheese, dark chocolate"
)

PROMPTS: tuple[tuple[str, str], ...] = (
    ("edit text", f"Correct the spelling in this paragraph and return the whole paragraph:\n\n"
                  f"{PARAGRAPH.replace('Visitors', 'Vistors').replace('quiet', 'quite')}"),
    ("rewrite code", f"Rename the variable `count` to `rated` in this Python code and return the whole code:\n\n"
                     f"```python\n{CODE}```"),
    ("edit JSON", f"Change the city to Paris in this JSON record and return the whole record:\n\n{RECORD}"),
    ("reformat list", f"Write this shopping list as a bulleted list, one item per line:\n\n{LIST}"),
    ("repeat text", f"Repeat the following paragraph word for word:\n\n{PARAGRAPH}"),
    ("ordinary chat", "Write a long story about a dragon who learns to bake bread."),
)  # fmt: skip

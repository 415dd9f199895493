"""What the Chat view reads of a stored conversation and of its messages.

The app's conversation store hands the view its own records (app/storage/records.py); the view depends
only on these fields, so it holds no database and imports no storage module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class ConversationRecord(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def title(self) -> str: ...

    @property
    def updated(self) -> float: ...

    @property
    def system_prompt(self) -> str: ...

    @property
    def message_count(self) -> int: ...


class MessageRecord(Protocol):
    @property
    def id(self) -> int: ...  # negative: kept in memory only (the disk refused it)

    @property
    def conversation_id(self) -> int: ...

    @property
    def role(self) -> str: ...  # system | user | assistant

    @property
    def text(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def ep(self) -> str: ...

    @property
    def stop_reason(self) -> str: ...  # eos | length | cancelled | context | error

    @property
    def stats(self) -> Mapping[str, object]: ...

"""The desktop app's test fixtures (tests/ui): the app itself, and no thread or warning left behind."""

from tests.ui.conftest import (  # noqa: F401
    make_studio,
    no_running_qthreads,
    no_unexpected_warnings,
)

"""A chat model loaded once on a device: the folder validated, the memory checked, the providers planned,
the onnxruntime-genai model and tokenizer loaded, the template tried. Conversations
(`engines.chat.conversation`) share one `ChatModel`; it holds no conversation state itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engines.chat.control_tokens import ControlTokens
from engines.chat.conversation import Conversation
from engines.chat.folder import ModelFolder, context_window, validate_model_folder
from engines.chat.generation import render_prompt
from engines.chat.model import ProviderPlan, chat_devices, discover, genai, load_native_model, plan_providers
from engines.chat.prepared import Prepared
from engines.chat.types import ChatMessage, ChatOptions
from engines.errors import ModelError
from engines.models import trial
from engines.types import CPU_EP, DeviceChoice, Placement, short_ep_name

__all__ = ["ChatModel"]

log = logging.getLogger(__name__)


class ChatModel:
    """One onnxruntime-genai model and tokenizer, loaded once; conversations share them."""

    def __init__(self, folder: ModelFolder, plan: ProviderPlan, model: Any, tokenizer: Any) -> None:
        self.folder = folder
        self.plan = plan
        self.model = model
        self.tokenizer = tokenizer
        self.device = str(getattr(model, "device_type", "") or "")
        eos = {int(t) for t in getattr(tokenizer, "eos_token_ids", ()) or ()}
        self.eos_token_ids = frozenset(eos)
        self._bos = _adds_bos(tokenizer)
        self.control_tokens = ControlTokens.of_folder(folder.path)  # message text never forms them
        self.memory_notice = ""  # set when the model may not fit comfortably in free RAM
        # Whether its graph can verify prompt-lookup drafts (every position's logits): None until a
        # conversation asks for it, False once onnxruntime-genai refused (a pruned LM head).
        self.prompt_lookup: bool | None = None

    def encode(self, text: str, continuation: bool = False) -> list[int]:
        """Token ids of `text`; a continuation gets no beginning-of-sequence token."""
        # Characters the tokenizer cannot map come back as -1, which the model would read as its last
        # vocabulary entry (ONNX Gather wraps negative indices): leave them out instead.
        ids = [int(t) for t in self.tokenizer.encode(text) if t >= 0]
        if continuation and self._bos is not None and ids[:1] == [self._bos]:
            ids = ids[1:]
        return ids

    def literal(self, text: str) -> str:
        """Message text as it goes into the template: control-token strings in it stay text."""
        return self.control_tokens.literal(text)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as the model reads it in a message."""
        return len(self.encode(self.literal(text)))

    def prompt_tokens(self, system_prompt: str, messages: Sequence[ChatMessage], prefix: str = "") -> int:
        """Tokens of the whole prompt for an answer to `messages` (after `prefix`, when one is continued): the
        conversation through the model's chat template, exactly as a new generator would read it."""
        text = render_prompt(self.tokenizer, system_prompt, messages, self.literal) + self.literal(prefix)
        return len(self.encode(text))

    @classmethod
    def load(
        cls,
        folder: str | Path,
        choice: DeviceChoice | None = None,
        *,
        available: frozenset[str] | None = None,
        check_memory: bool = True,
        prepared: Prepared | None = None,
    ) -> ChatModel:
        """Validate the folder, check it fits in memory, configure the providers, load model and tokenizer,
        check the template. A model that cannot fit in this machine's RAM is refused before loading.
        `prepared`: the folder check and devices the process that started this one did already."""
        from engines.models.fit import MAY_BE_SLOW, WONT_FIT, estimate_fit

        choice = choice or DeviceChoice()
        info = (prepared.folder_for(folder) if prepared is not None else None) or validate_model_folder(folder)
        fit = estimate_fit(Path(info.path))
        if check_memory and fit.verdict == WONT_FIT:
            raise ModelError(
                f"{info.name} needs more memory than this machine has: {fit.message()}",
                "Choose a smaller model (an int4 variant) or a shorter context.",
            )
        # Before onnxruntime-genai runs the model or its template in this process: once, in a bounded child.
        trial.ensure_tried(info.path, trial.CHAT)
        devices = prepared.devices if prepared is not None and available is None else chat_devices(available, choice)
        plan = plan_providers(info, choice, devices)
        if prepared is not None and plan.ep != CPU_EP:
            discover()  # a device EP: registered in this process too (plugin libraries), as discovery does
        og = genai(runtime_first=plan.ep != CPU_EP)  # the CPU needs no ONNX Runtime module (nor numpy) here
        model, plan = load_native_model(og, info, plan, strict=choice.strict)
        try:
            tokenizer = og.Tokenizer(model)
        except Exception as exc:
            raise ModelError(
                f"The tokenizer in {info.path} could not be loaded: {exc}",
                "Copy tokenizer.json and tokenizer_config.json from the model's source again.",
            ) from exc
        loaded = cls(info, plan, model, tokenizer)
        loaded.memory_notice = fit.message() if fit.verdict == MAY_BE_SLOW else ""
        render_prompt(tokenizer, "", [ChatMessage("user", "Hi")])  # a missing template fails here, not mid-chat
        if plan.fell_back:
            log.info("chat model %s runs on the CPU: %s", info.name, plan.reason)
        log.info("loaded chat model %s on %s (%s)", info.name, plan.ep, loaded.device)
        return loaded

    @property
    def ep(self) -> str:
        return self.plan.ep

    @property
    def placement(self) -> Placement:
        return self.plan.placement()

    def context_window(self, options: ChatOptions) -> int:
        return context_window(self.folder, options.context_window)

    def new_conversation(self, system_prompt: str = "", options: ChatOptions | None = None) -> Conversation:
        return Conversation(self, system_prompt, options or ChatOptions())

    def describe(self) -> str:
        where = short_ep_name(self.ep)
        if self.plan.fell_back:
            where += f" (fell back: {self.plan.reason})"
        return f"{self.folder.name} on {where}"


def _adds_bos(tokenizer: Any) -> int | None:
    """The BOS id when the tokenizer puts one in front of any text it encodes, else None."""
    bos = getattr(tokenizer, "bos_token_id", None)
    try:
        probe = [int(t) for t in tokenizer.encode("a")]
    except Exception:
        return None
    return int(bos) if bos is not None and probe[:1] == [int(bos)] else None

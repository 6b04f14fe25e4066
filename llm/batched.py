"""Several samples of one prompt decoded together on any `llama_cpp.Llama` (llama.cpp's batched API through
llama-cpp-python's low-level bindings).

llama-cpp-python's `Llama` decodes one sequence at a time (its batched-inference request is still open
upstream), so `BatchedSampler` speaks llama.cpp's own batched API, as llama.cpp's examples/batched does. It
serves both the in-process model (`rlgpt.llm.embedded.EmbeddedBackend.complete_many`) and the model inside
the isolated server process (`rlgpt.llm.llama_server.BatchedCompletions`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

from rlgpt.llm.errors import ConfigError, ContextOverflowError
from rlgpt.llm.types import Completion, Message, SamplingParams


class BatchedSampler:
    """One reply per sampling to the same prompt, decoded together on `llama`; keeps the second llama.cpp
    context its sequences decode in and the chat template's formatter between calls.

    Not thread-safe, and it uses `llama`'s own context: the caller holds whatever lock keeps other requests
    off `llama` (the backend's lock in process, the server's model locks in the server)."""

    def __init__(self, llama: Any, *, name: str, sampler_settings: Mapping[str, Any] | None = None) -> None:
        """Args:
            llama: the loaded `llama_cpp.Llama` (with its GGUF's chat template).
            name: the model's name in error messages (its file name).
            sampler_settings: the sampler chain's settings beyond temperature and top_p, as
                `Llama._init_sampler` names them (top_k, min_p, repeat_penalty, ...); None = its defaults,
                which `Llama.create_chat_completion` uses too. A server passes its chat route's defaults,
                which differ (llama_cpp.server: repeat_penalty 1.1), so a batched reply is sampled as that
                route samples one.
        """
        self.llama = llama
        self.name = name
        self.sampler_settings = dict(sampler_settings or {})
        self._ctx: Any = None  # the context the sequences decode in (made on first need)
        self._formatter: Any = None  # the chat template as a formatter (made on first need)

    @property
    def n_ctx(self) -> int:
        """The model context's window in tokens."""
        return int(self.llama.n_ctx())

    def complete_many(self, messages: list[Message], samplings: Sequence[SamplingParams], *,
                      model: str) -> list[Completion]:
        """One reply per entry of `samplings` to the same prompt (no schema: code replies), decoded together;
        each `Completion` names `model`.

        The prompt is evaluated once in the model's usual context (reusing its kept prefix and prompt
        states, like `Llama.create_chat_completion`), its KV cells are moved into a second context with one
        sequence id per sample (`llama_state_seq_get_data`/`set_data`, then `llama_memory_seq_cp`: the
        sequences share the prompt's cells), and each step decodes one token of every live sequence in one
        `llama_batch`. On a CPU a step over a few sequences costs less than that many steps over one (the
        weights are read once per step), so N samples take less than N times one. Each sequence is sampled
        by the sampler chain `create_chat_completion` builds (with `sampler_settings`), with its own seed and
        temperature, and, like it, stops at ``n_ctx - prompt`` tokens whatever its `max_tokens`. One
        sequence at temperature 0 is exactly what `create_chat_completion` returns right after it (greedy:
        it samples from the state this call leaves; this call evaluates the prompt's last token alone, and
        a state whose last token was evaluated in a batch with the prompt rounds a little differently);
        beside others, a step over several sequences rounds a little differently too. Either can flip a
        close choice.

        Raises:
            ContextOverflowError: the prompt does not fit the model's context.
        """
        if not samplings:
            return []
        import llama_cpp

        prompt, stops = self._chat_prompt(messages)
        if len(prompt) + 1 > self.n_ctx:
            raise ContextOverflowError(
                f"prompt does not fit the {self.n_ctx}-token context of {self.name} ({len(prompt)} tokens); "
                f"shorten the prompt or raise n_ctx")
        # As `create_completion` truncates: no sequence runs past the model's window.
        limits = [min(s.max_tokens, self.n_ctx - len(prompt)) for s in samplings]
        computed = self._prefill(prompt)
        ctx = self._sequences_context(len(samplings), len(prompt) + sum(limits))
        self._share_prompt(ctx, len(samplings))
        texts, reasons, counts = self._decode_sequences(llama_cpp, ctx, len(prompt), samplings, limits, stops)
        return [Completion(text=text, prompt_tokens=len(prompt), completion_tokens=n, finish_reason=reason,
                           model=model,
                           # the prompt was computed once, for the first sequence; the others share it
                           cached_tokens=len(prompt) - computed if i == 0 else len(prompt))
                for i, (text, reason, n) in enumerate(zip(texts, reasons, counts, strict=True))]

    def _chat_prompt(self, messages: list[Message]) -> tuple[list[int], list[str]]:
        """The prompt tokens and stop strings `create_chat_completion` makes of `messages` (the GGUF's chat
        template, formatted as llama-cpp-python's own chat handler formats it)."""
        llama = self.llama
        if self._formatter is None:
            from llama_cpp import llama_chat_format

            template = llama.metadata.get("tokenizer.chat_template")
            if template is None or llama.chat_format != "chat_template.default" or llama.chat_handler:
                raise ConfigError(f"{self.name} has no GGUF chat template; batched sampling needs one")
            eos, bos = llama.token_eos(), llama.token_bos()
            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llama._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])
        result = self._formatter(messages=messages)
        tokens = llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)
        stop = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        return tokens, [s for s in stop if s]

    def _prefill(self, prompt: list[int]) -> int:
        """Evaluate `prompt` in the model's context as `create_completion` does (a longer kept prompt state
        is loaded first; the context's own matching prefix is kept); returns the prompt tokens computed."""
        llama = self.llama
        prefix = llama.longest_token_prefix
        if llama.cache is not None:
            try:
                kept = llama.cache[prompt]
                if prefix(kept.input_ids.tolist(), prompt) > prefix(llama._input_ids.tolist(), prompt):
                    llama.load_state(kept)
            except KeyError:
                pass
        reuse = min(prefix(llama._input_ids.tolist(), prompt), len(prompt) - 1)  # >= 1 token for the logits
        llama.n_tokens = reuse  # `eval` drops the context's cells past it
        llama.eval(prompt[reuse:])
        if llama.cache is not None:
            llama.cache[prompt] = llama.save_state()
        return len(prompt) - reuse

    def _sequences_context(self, n_seq: int, n_cells: int) -> Any:
        """A context for `n_seq` sequences over one prompt, `n_cells` KV cells in all (kept and reused; made
        again when a call needs more). Unified KV cells: the sequences share the prompt's."""
        import llama_cpp
        from llama_cpp import _internals

        ctx = self._ctx
        if ctx is not None and ctx.params.n_ctx >= n_cells and ctx.params.n_seq_max >= n_seq:
            llama_cpp.llama_memory_clear(ctx.memory, True)
            return ctx
        if ctx is not None:
            ctx.close()
        # The model context's own settings (its KV types and attention kernel decide the cells' layout,
        # which must match for the prompt's cells to move over), with room for the sequences.
        main = self.llama.context_params
        params = type(main).from_buffer_copy(main)
        params.n_ctx = -(-max(n_cells, self.n_ctx) // 256) * 256
        params.n_batch = params.n_ubatch = max(self.llama.n_batch, n_seq)
        params.n_seq_max = max(n_seq, 4)
        params.kv_unified = True
        self._ctx = _internals.LlamaContext(model=self.llama._model, params=params, verbose=False)
        return self._ctx

    def _share_prompt(self, ctx: Any, n_seq: int) -> None:
        """Move the prompt's KV cells (sequence 0 of the model's context) into `ctx` as sequence 0 and share
        them with sequences 1..n_seq-1."""
        import llama_cpp

        main = self.llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(main, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(main, buffer, size, 0)
        if written == 0 or llama_cpp.llama_state_seq_set_data(ctx.ctx, buffer, written, 0) == 0:
            raise RuntimeError("llama.cpp could not move the prompt's KV cells between contexts")
        for seq in range(1, n_seq):
            llama_cpp.llama_memory_seq_cp(ctx.memory, 0, seq, -1, -1)

    def _decode_sequences(self, llama_cpp: Any, ctx: Any, n_prompt: int, samplings: Sequence[SamplingParams],
                          limits: list[int], stops: list[str]) -> tuple[list[str], list[str], list[int]]:
        """Sample every sequence to its end (an end-of-generation token, a stop string or its token limit),
        one `llama_batch` of one token per live sequence per step."""
        llama = self.llama
        vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        samplers = []
        for s in samplings:
            llama.set_seed(s.seed)  # the chain `generate` builds, with this sequence's seed
            samplers.append(llama._init_sampler(**self.sampler_settings, temp=s.temperature, top_p=s.top_p))
        tokens: list[list[int]] = [[] for _ in samplings]
        reasons = ["length"] * len(samplings)
        # The first token of each sequence comes from the prompt's last logits, still in the model's context.
        step = [sampler.sample(llama._ctx, -1) for sampler in samplers]
        batch = llama_cpp.llama_batch_init(len(samplings), 0, 1)
        try:
            live = list(range(len(samplings)))
            while True:
                still = []
                for seq in live:
                    token = step[seq]
                    if llama_cpp.llama_vocab_is_eog(vocab, token):
                        reasons[seq] = "stop"
                        continue
                    tokens[seq].append(token)
                    if stops and self._stopped(tokens[seq], stops):
                        reasons[seq] = "stop"
                    elif len(tokens[seq]) < limits[seq]:
                        still.append(seq)
                live = still
                if not live:
                    break
                batch.n_tokens = len(live)
                for j, seq in enumerate(live):
                    batch.token[j] = tokens[seq][-1]
                    batch.pos[j] = n_prompt + len(tokens[seq]) - 1
                    batch.n_seq_id[j] = 1
                    batch.seq_id[j][0] = seq
                    batch.logits[j] = True
                if llama_cpp.llama_decode(ctx.ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed on a batch of sequences (KV cells exhausted?)")
                for j, seq in enumerate(live):
                    step[seq] = samplers[seq].sample(ctx, j)
        finally:
            llama_cpp.llama_batch_free(batch)
            for sampler in samplers:
                sampler.close()
        texts = [self._text(t, stops) for t in tokens]
        return texts, reasons, [len(t) for t in tokens]

    def _stopped(self, tokens: list[int], stops: list[str]) -> bool:
        tail = self.llama.detokenize(tokens[-8:]).decode("utf-8", errors="ignore")
        return any(stop in tail for stop in stops)

    def _text(self, tokens: list[int], stops: list[str]) -> str:
        """The reply text of `tokens`, cut before the first stop string (as `create_completion` cuts)."""
        text = self.llama.detokenize(tokens).decode("utf-8", errors="ignore")
        cuts = [text.find(stop) for stop in stops if stop in text]
        return text[:min(cuts)] if cuts else text

    def close(self) -> None:
        """Free the sequences' context (the model itself stays)."""
        if self._ctx is not None:
            self._ctx.close()
            self._ctx = None

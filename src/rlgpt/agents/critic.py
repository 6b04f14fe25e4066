"""The critic: reads probes, the evaluation and diagnostics; tells the fast or slow agent what to change.

It reads traces per sub-action (`render_subactions`: probe rates, the macro's training statistics, the last
actions of a failing probe call), names the sub-action whose macro failed and what its code must change;
the loop hands exactly that text to the next fast-agent prompt for that sub-action (`critic_notes`).

Its prompt renders everything compactly and within `AgentConfig.critic_max_chars`: a small model reads a
short, dense report better than raw JSON, and a long report must not overflow the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlgpt import prompts
from rlgpt.agents.common import (
    StartedRole,
    bounded,
    degradable,
    describe_task,
    documentation,
    note_fallback,
    render_decomposition,
)
from rlgpt.agents.replies import Decomposition, Feedback
from rlgpt.llm.context import RolePrompt, ask_fitted, fit
from rlgpt.llm.types import Message, SamplingParams
from rlgpt.macro.diagnostics import Diagnostic
from rlgpt.macro.probe import ProbeReport

ROLE = "critic"


def render_eval(report: Mapping[str, Any] | None) -> str:
    """An evaluation (e.g. `rlgpt.rl.evaluate.EvalReport` as a dict) as short lines.

    Known keys: ``success_rate``, ``achievement_success`` (only non-zero rates are listed),
    ``mean_episode_steps``, ``mean_return``, ``episodes``, ``macro_stats`` (name -> counters such as calls,
    successes, failures by kind) and ``traces`` (text of the last steps before failures); other scalar keys
    are listed as they are.
    """
    if not report:
        return "(no evaluation yet)"
    lines: list[str] = []
    done = {"achievement_success", "macro_stats", "traces", "task"}
    for key, value in report.items():
        if key not in done and isinstance(value, int | float | str | bool):
            lines.append(f"{key}: {value:.3g}" if isinstance(value, float) else f"{key}: {value}")
    rates = report.get("achievement_success") or {}
    unlocked = ", ".join(f"{k} {v:.0%}" for k, v in sorted(rates.items(), key=lambda kv: -kv[1]) if v > 0)
    if rates:
        lines.append(f"achievements unlocked: {unlocked or 'none'}")
    for name, stats in (report.get("macro_stats") or {}).items():
        parts = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in _flat(stats).items() if v)
        lines.append(f"macro {name}: {parts or 'never called'}")
    traces = report.get("traces") or []
    for trace in traces[-3:]:
        lines.append(f"trace before a failure: {trace}")
    return "\n".join(lines)


def _flat(stats: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}_"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def render_diagnostics(diagnostics: Sequence[Diagnostic | str | tuple[str, Diagnostic]]) -> str:
    """One line per diagnostic (``(source name, Diagnostic)`` pairs are prefixed with the name);
    repeated lines are counted, not repeated."""
    counts: dict[str, int] = {}
    for item in diagnostics:
        line = f"{item[0]}: {item[1]}" if isinstance(item, tuple) else str(item)
        counts[line] = counts.get(line, 0) + 1
    if not counts:
        return "none"
    return "\n".join(f"- {line}" + (f" (x{n})" if n > 1 else "") for line, n in counts.items())


def render_subactions(decomposition: Decomposition | None, probes: Sequence[ProbeReport],
                      evaluation: Mapping[str, Any] | None) -> str:
    """One block per coded sub-action: its probe's rates, its macro's statistics in training (the
    evaluation's ``macro_stats``) and the last actions and inventory change of its first failing probe
    call."""
    if decomposition is None:
        return "(no decomposition)"
    by_name = {p.macro: p for p in probes}
    stats = (evaluation or {}).get("macro_stats") or {}
    lines = []
    for sub in decomposition.subactions:
        if sub.how != "code":
            lines.append(f"- {sub.name}: learned by RL")
            continue
        probe = by_name.get(sub.name)
        if probe is None:
            lines.append(f"- {sub.name} (goal {sub.goal or 'none'}): no macro kept (none compiled)")
            continue
        reached = probe.achieved_calls
        goal = f"goal {sub.goal} reached in {reached} of {len(probe.calls)} probe calls, " if sub.goal else ""
        lines.append(f"- {sub.name}: {goal}returned {probe.success_rate:.0%}, "
                     f"mean {probe.mean_steps:.0f} steps")
        trained = _flat(stats.get(sub.name) or {})
        lines.append("  in training: " + (", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in trained.items() if v)
            or "never called"))
        failed = [c for c in probe.calls if c.reached_goal is False or c.outcome != "success"]
        if failed:
            call = failed[0]
            diff = ", ".join(f"{k}{v:+d}" for k, v in call.inventory_diff.items()) or "no change"
            diagnostic = f", {call.diagnostic}" if call.diagnostic else ""
            lines.append(f"  a failing call: {call.outcome}{diagnostic}; inventory {diff}; last actions: "
                         f"{' '.join(call.trace) or '(none)'}")
    return "\n".join(lines) or "(no sub-actions)"


def critic_notes(feedback: Mapping[str, Any]) -> dict[str, str]:
    """The critic's change for the sub-action it named (a `Feedback` as a dict), keyed by that sub-action
    (`rlgpt.agents.fast.FastAgent.run`'s `notes`); empty when it named none."""
    sub, change = feedback.get("subaction", ""), feedback.get("change", "")
    return {sub: change} if sub and change else {}


def critic_schema(decomposition: Decomposition | None) -> dict[str, Any]:
    """The critic's reply schema with `subaction` and `change` required and `subaction` limited to the coded
    sub-actions' names (or "")."""
    schema = prompts.schema_for_role(ROLE)
    names = [s.name for s in decomposition.subactions if s.how == "code"] if decomposition else []
    props = schema["properties"]
    # The verdict first, then the note (a grammar writes properties in order), all short enough to fit the
    # reply's token limit: the 0.5B's longer replies were cut at 320 tokens.
    short = {"type": "string", "minLength": 1, "maxLength": 160}
    schema["properties"] = {"target": props["target"],
                            "subaction": {"type": "string", "enum": [*names, ""]},
                            "change": {"type": "string", "maxLength": 240},
                            **{k: {"type": "array", "maxItems": 2, "items": short}
                               for k in ("problems", "suggestions")}}
    schema["required"] = ["target", "subaction", "change", "problems", "suggestions"]
    return schema


class Critic(StartedRole):
    """Probes + evaluation + diagnostics in, typed `Feedback` out."""

    def prompt(self, task: str, iteration: int, decomposition: Decomposition | None,
               probes: Sequence[ProbeReport] = (), evaluation: Mapping[str, Any] | None = None,
               diagnostics: Sequence[Diagnostic | str | tuple[str, Diagnostic]] = ()) -> RolePrompt:
        """The prompt's values; the four reports share `critic_max_chars` (sub-actions 25%, probes 25%,
        evaluation 30%, diagnostics 20%), and `fit` cuts them further (probes first) when the context needs
        it."""
        limit = self.config.critic_max_chars
        probe_text = "\n".join(p.render() for p in probes) or "(no macros probed)"
        return RolePrompt(ROLE, {
            **documentation(self.config.api, self.config.env_doc),
            "task": describe_task(task, self.config.env_doc, self.start),
            "iteration": str(iteration),
            "decomposition": render_decomposition(decomposition),
            "subactions": bounded(render_subactions(decomposition, probes, evaluation), int(limit * 0.25)),
            "probes": bounded(probe_text, int(limit * 0.25)),
            "eval_report": bounded(render_eval(evaluation), int(limit * 0.30)),
            "diagnostics": bounded(render_diagnostics(diagnostics), int(limit * 0.20)),
        })

    def messages(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The prompt (`prompt`'s arguments), fitted to the context."""
        return fit(self.prompt(*args, **kwargs), self.client, self.config.json_max_tokens)

    def review(self, task: str, iteration: int, decomposition: Decomposition | None,
               probes: Sequence[ProbeReport] = (), evaluation: Mapping[str, Any] | None = None,
               diagnostics: Sequence[Diagnostic | str | tuple[str, Diagnostic]] = ()) -> Feedback:
        """Ask for feedback (greedy; schema-checked and re-asked by the client).

        Raises:
            rlgpt.llm.LLMError: no schema-valid reply within the client's retries (or the call failed).
        """
        prompt = self.prompt(task, iteration, decomposition, probes, evaluation, diagnostics)
        sampling = SamplingParams(temperature=0.0, max_tokens=self.config.json_max_tokens,
                                  seed=self.config.seed)
        schema = critic_schema(decomposition)
        data = ask_fitted(prompt, self.client, self.config.json_max_tokens,
                          lambda messages: self.client.structured(ROLE, messages, schema, sampling=sampling))
        return Feedback.from_dict(data)

    def review_or_fallback(self, *args: Any, **kwargs: Any) -> tuple[Feedback, str]:
        """`review`, or, when the critic's reply never validates, a "fast" decision carrying the error as
        its problem (counted in ``llm/fallbacks``); returns the feedback and the error ("" = none)."""
        try:
            return self.review(*args, **kwargs), ""
        except Exception as exc:
            if not degradable(exc):
                raise
            note_fallback(self.client, ROLE)
            error = str(exc)
            return Feedback("fast", (f"the critic gave no valid feedback ({error[:300]})",),
                            ("keep the decomposition; fix what the probes and diagnostics report",)), error

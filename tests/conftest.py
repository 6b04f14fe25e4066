import os

# Oversubscribed BLAS/OpenMP threads make a 2-core box 5-10x slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
from rlgpt.llm.embedded import quiet_openmp  # noqa: E402

quiet_openmp(os.environ)
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

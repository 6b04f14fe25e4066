"""rlgpt: RL-GPT (LLM-written macro-actions + Sample Factory PPO), runnable offline on a CPU box."""

__version__ = "0.1.0"

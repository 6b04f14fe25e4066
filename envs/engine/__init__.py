"""A numba-compiled, batched Crafter engine: `CompiledBatch`, step for step the games of `ReferenceBatch`.

The games' state lives in numpy arrays (`kernels.State`) and each step or reset runs in compiled functions
over all games at once; the world RNG is crafter's MT19937 (`rlgpt.envs.mt19937`, which the world
generator draws from too) with numpy's legacy transforms, and crafter's recipes come from its own data
(`rules`). tests/envs/test_engine.py checks equality with
`ReferenceBatch`, observation and hidden state, over long scripted and random games.
"""

from .batch import CompiledBatch, world_seed

__all__ = ["CompiledBatch", "world_seed"]

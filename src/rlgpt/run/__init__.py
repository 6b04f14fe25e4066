"""`rlgpt run`'s machinery: the loop (Algorithm 1), the baselines, the executor that runs trainings, the skill
library, the report, and the layout of a run directory."""

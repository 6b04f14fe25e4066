"""`rlgpt run`'s machinery: the loop (Algorithm 1), the baselines, the executor that runs trainings, the skill
library and the report (the file names of a run directory are `rlgpt.layout`)."""

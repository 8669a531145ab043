# wattsched: `make demo` runs the simulator on the bundled trace, `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench docs clean lwp reproduce-ahmed reproduce-borghesi reproduce-dutot reproduce-lwp

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg setup.py pyproject.toml src/wattsched/_native.py
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## demo: set up, simulate the bundled trace under a power cap (runs/demo/report.html), then run the
## daemon against the built-in simulated cluster and show its decisions and metrics, then again with
## the dr policy through a demand-response event (frequencies lowered; a job evicted when that is not enough)
demo: $(STAMP)
	$(BIN)/wattsched demo --out runs/demo
	rm -rf runs/daemon-sim
	$(BIN)/wattsched daemon --backend sim --cycles 20 --state-dir runs/daemon-sim --show-metrics
	$(BIN)/wattsched audit --state-dir runs/daemon-sim --backend sim --since 1d --limit 15
	rm -rf runs/daemon-dr
	./scripts/demo-dr-config runs/daemon-dr.yaml runs/daemon-dr
	$(BIN)/wattsched daemon -c runs/daemon-dr.yaml --cycles 20 --show-metrics
	$(BIN)/wattsched audit -c runs/daemon-dr.yaml --since 1d --action set_freq --limit 8
	$(BIN)/wattsched audit -c runs/daemon-dr.yaml --since 1d --action requeue --action hold --limit 4

## test: set up (pip and system packages) and run the whole suite, slow end-to-end tests included
test: $(STAMP)
	./scripts/install-system-deps
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports

## bench: simulation throughput on every trace in ../shared/traces, easy-pc overhead, one daemon cycle at scale,
## the whole `wattsched simulate` process (report included) against AccaSim
bench: $(STAMP)
	$(BIN)/python benchmarks/sim_throughput.py
	$(BIN)/python benchmarks/easy_pc_overhead.py
	$(BIN)/python benchmarks/daemon_cycle.py
	$(BIN)/python benchmarks/cli_whole_process.py

## lwp: the lightweight-predictions reproduction (1,530 runs as a sweep on a local Dask cluster) into its results/
lwp: $(STAMP)
	$(BIN)/python experiments/lightweight-predictions/run.py --out experiments/lightweight-predictions/results

## reproduce-lwp: the same with COMPARISON.md, in a temporary directory unless OUT=DIR
##   (QUICK=1 for the smoke variant, ARGS="--part algorithms" for the knapsack question alone)
reproduce-lwp: $(STAMP)
	$(BIN)/python experiments/lightweight-predictions/run.py $(if $(OUT),--out $(OUT)) $(if $(QUICK),--quick) $(ARGS)

## reproduce-ahmed: Ahmed et al. 2017 (demand response) on SDSC-Par, 52 runs, about 22 min on 2 cores:
## OUT/COMPARISON.md (default runs/ahmed2017) answers each claim of the paper; QUICK=1 for 300 jobs (about 2 min)
reproduce-ahmed: $(STAMP)
	$(BIN)/python experiments/ahmed2017/run.py $(if $(QUICK),--quick) $(if $(OUT),--out $(OUT))

## reproduce-borghesi: the Borghesi et al. 2018 reproduction as committed (experiments/borghesi2018/README.md):
## runs, tables, figures and COMPARISON.md under OUT (default: a directory in the temporary directory; the results in
## OUT/results); QUICK=1 for the small variant CI runs; B18_ARGS to change the campaign
B18_ARGS ?= --instances 1 --budgets 100,50,30,10 --dec-time-limit 0.01 --dec-max-time-limit 0.04 --dec-horizon 50 \
	--dec-max-jobs 200 --dec-instances 1 --dec-paper-instances 1 --dec-paper-budgets 50
reproduce-borghesi: $(STAMP)
	$(BIN)/python experiments/borghesi2018/run.py $(if $(QUICK),--quick,$(B18_ARGS)) $(if $(OUT),--out $(OUT))

## reproduce-dutot: Dutot et al. 2017 (energy budgets), 980 runs on KTH-SP2 and LLNL-Atlas, about 63 min on 2 cores,
## into OUT (default /tmp/wattsched-dutot2017; nothing written into the checkout); writes OUT/COMPARISON.md.
## QUICK=1: 38 runs; ARGS for more options of experiments/dutot2017/run.py
reproduce-dutot: $(STAMP)
	$(BIN)/python experiments/dutot2017/run.py --out $(if $(OUT),$(OUT),/tmp/wattsched-dutot2017) $(if $(QUICK),--quick) $(ARGS)

## docs: regenerate docs/config.md from the config models
docs: $(STAMP)
	$(BIN)/python -c "from wattsched.reference import render_config_reference as r; print(r(), end='')" > docs/config.md

clean:
	rm -rf $(VENV) runs build *.egg-info src/*.egg-info .pytest_cache .ruff_cache

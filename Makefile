# sluice: `make` builds build/sluice; `make demo` is the quick start;
# `make check` runs every test (plus ASan+UBSan and TSan builds).
SHELL := /bin/bash
# No "Entering directory" lines from the sub-makes (cmake's own progress
# stays).
MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
# The Python module is built for the project venv when there is one.
PY_FLAGS = $$(test -x .venv/bin/python && echo -DPython3_EXECUTABLE=$(CURDIR)/.venv/bin/python)
DEMO_DIR ?= $(BUILD)/demo-data
DEMO_IMAGES ?= 1000

.PHONY: all deps demo check check-deps check-format check-build check-test check-asan check-tsan check-fuzz test fuzz-build fuzz fuzz-runs bench clean format format-check

# Quiet: cmake's progress lines, not its "Built target" list.
all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(PY_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@set -o pipefail; cmake --build $(BUILD) -j $(JOBS) | { grep --line-buffered -v '] Built target ' || true; }

deps:
	@scripts/install-deps

# A bare machine: Debian packages, build, a generated dataset, then the
# loader alone, a consumer with a training step, and the decode ceiling
# (scripts/demo.sh).
demo: deps all
	@test -d $(DEMO_DIR) || $(BUILD)/sluice make-dataset --synthetic $(DEMO_DIR) --images $(DEMO_IMAGES) --classes 10
	@scripts/demo.sh $(BUILD) $(DEMO_DIR)

# Every test, in stages, each its own target (`make check-asan` runs one):
#   deps    the Debian packages and the project venv (scripts/install-deps);
#   format  the layout (clang-format);
#   build   warnings as errors, everything;
#   test    every ctest (the install tests included: the installed library,
#           an images-only build, the exported symbols; one ctest per Python
#           test file, so that -j balances them with the C tests), TEST_JOBS
#           at once: one more than the cores, as many tests wait (servers,
#           Ray, throttled reads, subprocesses) and a core would idle;
#   asan    the unit tests under ASan+UBSan (-O1: the numeric tests at -O0
#           took minutes; ASan's own advice), and the Python binding's
#           thread test with the extension built under ASan; built with
#           clang, with the libFuzzer targets, so that the library is
#           compiled once for this stage and fuzz (its edge counters only:
#           comparison tracing made the numeric tests 3x slower);
#   tsan    the concurrency tests under TSan (only they are built);
#   fuzz    the libFuzzer targets of the asan build run on their corpora
#           (the corpus replay is the regression guard; ctest also replays
#           each corpus in the plain and ASan builds) and CHECK_FUZZ_SECONDS
#           of exploration each, FUZZ_JOBS (= JOBS) of them at once.
# check prints each stage's wall and CPU seconds as it ends, and all of them
# at the end (what the 20-minute budget of CI is checked against).
CHECK_STAGES = deps format build test asan tsan fuzz
TEST_JOBS ?= $(shell echo $$(($(JOBS) + 1)))
CHECK_FUZZ_SECONDS ?= 5
check:
	@start=$$(date +%s); tf=$$(mktemp); trap 'rm -f "$$tf" "$$tf.n"' EXIT; report=; \
	cpu() { times >"$$tf"; awk 'NR == 2 {split($$1, u, /[ms]/); split($$2, s, /[ms]/); \
	  printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2]}' "$$tf"; }; \
	for s in $(CHECK_STAGES); do \
	  t0=$$(date +%s); cpu >"$$tf.n"; c0=$$(<"$$tf.n"); \
	  $(MAKE) check-$$s || { echo "check: stage $$s FAILED"; exit 1; }; \
	  cpu >"$$tf.n"; line="$$s $$(($$(date +%s) - t0)) s (CPU $$(($$(<"$$tf.n") - c0)) s)"; \
	  echo "check: $$line"; report="$$report, $$line"; \
	done; \
	echo "check: passed in $$(($$(date +%s) - start)) s: $${report#, }"
check-deps:
	@scripts/install-deps --python
check-format: format-check
check-build:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_WERROR=ON $(PY_FLAGS) >/dev/null
	cmake --build build-check -j $(JOBS)
check-test:
	cd build-check && ctest --output-on-failure -j $(TEST_JOBS)
check-asan:
	CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DSL_WERROR=ON -DSL_SANITIZE=address,undefined -DSL_FUZZ=ON -DSL_FUZZ_COVERAGE=inline-8bit-counters,pc-table $(PY_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L '^(unit|asan)$$'
check-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_WERROR=ON -DSL_SANITIZE=thread >/dev/null
	cmake --build build-tsan -j $(JOBS) --target concurrency_tests
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -L concurrency
check-fuzz:
	$(MAKE) fuzz-runs FUZZ_BUILD=build-asan FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

# libFuzzer targets (clang), each run for FUZZ_SECONDS on a copy of its corpus,
# FUZZ_JOBS of them at once (each fuzzer is one process, one core). `make
# fuzz` builds them in FUZZ_BUILD; check-fuzz runs those check-asan built.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_JOBS ?= $(JOBS)
FUZZERS = $(basename $(notdir $(wildcard fuzz/fuzz_*.c)))
# The shared data some targets also fuzz with (fuzz_bpe: the real GPT-2
# vocabulary), where the corpus replay finds it (tests/CMakeLists.txt); a
# target skips those modes when it is absent.
SL_SHARED_DATA ?= $(abspath $(CURDIR)/../shared/data)
export SL_SHARED_DATA
fuzz-build:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_FUZZ=ON -DSL_BUILD_TESTS=OFF -DSL_SANITIZE=address,undefined >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZERS)
fuzz: fuzz-build
	@$(MAKE) fuzz-runs
fuzz-runs:
	@test -d "$(SL_SHARED_DATA)" || echo "fuzz: no $(SL_SHARED_DATA): the modes on shared data are skipped"
	@$(MAKE) -j $(FUZZ_JOBS) --output-sync=target $(addprefix fuzz-run-,$(FUZZERS))
fuzz-run-%:
	@rm -rf $(FUZZ_BUILD)/corpus-$* && cp -r fuzz/corpus/$* $(FUZZ_BUILD)/corpus-$*
	@echo "fuzzing $* for $(FUZZ_SECONDS)s"
	@if ! $(FUZZ_BUILD)/fuzz/$* -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 \
	    $(FUZZ_BUILD)/corpus-$* > $(FUZZ_BUILD)/$*.log 2>&1; then \
	  tail -40 $(FUZZ_BUILD)/$*.log; echo "fuzz: $* FAILED"; exit 1; fi
	@grep -E 'stat::number_of_executed_units' $(FUZZ_BUILD)/$*.log | sed "s/^/$*: /"

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: all
	@scripts/install-deps --python
	.venv/bin/python bench/compare_torch.py

# The C files clang-format owns: every tracked .c/.h but the generated table.
FORMAT_FILES = $$(git ls-files "*.c" "*.h" | grep -v "wp_unicode_compat.h\|bpe_uclass.h")
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: ok"

clean:
	rm -rf build build-check build-asan build-tsan build-fuzz

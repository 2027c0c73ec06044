# fanout — make run: set up and run the default job; make test: set up and run the tests.
SWIFT ?= swift
CONFIG ?= release
BIN = .build/$(CONFIG)/fanout
EXAMPLE_TRACE = reports/examples/game-night.trace.jsonl
RUN_DIR = reports/runs

.PHONY: run replay-example test deps build clean

## Install what is missing: the C libraries the project links (libuv, zlib), by apt.
deps:
	@missing=""; \
	pkg-config --exists libuv 2>/dev/null || missing="$$missing libuv1-dev"; \
	pkg-config --exists zlib 2>/dev/null || missing="$$missing zlib1g-dev"; \
	command -v pkg-config >/dev/null 2>&1 || missing="pkg-config $$missing"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@# The reference HdrHistogram reader, for the histogram-log interop test (when Python is present).
	@if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import hdrh' 2>/dev/null; then \
	  echo "installing: hdrhistogram (PyPI)"; python3 -m pip install -q hdrhistogram; \
	fi

build: deps
	$(SWIFT) build -c $(CONFIG) --product fanout

## Run the default scenario (real time, ~30 s) and write its run folder under reports/runs/.
run: build
	$(BIN) run default

## Replay the example trace and keep its dump under reports/runs/.
replay-example: build
	@mkdir -p $(RUN_DIR)
	$(BIN) replay $(EXAMPLE_TRACE) --dump $(RUN_DIR)/game-night.dump.jsonl

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

## Build the tests (debug) and run the UVLoop tests under valgrind: no memory error, no definite leak.
## Debian 12's valgrind 3.19 crashes (an internal SIGSEGV) when libdispatch parks the test runner's main
## thread in sigsuspend() on a `static const` mask, which valgrind writes to; a preloaded sigsuspend that
## passes a writable copy of the mask avoids it. Logs: .build/check-memory.{tests,valgrind}.log.
.PHONY: check-memory
check-memory: deps
	@command -v valgrind >/dev/null 2>&1 || { echo "check-memory needs valgrind (apt-get install valgrind)"; exit 1; }
	$(SWIFT) build --build-tests
	@printf '%s\n' '#include <signal.h>' '#include <sys/syscall.h>' '#include <unistd.h>' \
	  'int sigsuspend(const sigset_t *mask) {' '    sigset_t copy = *mask;' \
	  '    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));' '}' \
	  | $(CC) -shared -fPIC -O2 -x c - -o .build/valgrind-sigsuspend.so
	@status=0; \
	LD_PRELOAD=$(CURDIR)/.build/valgrind-sigsuspend.so valgrind --error-exitcode=1 --leak-check=full \
	  --errors-for-leak-kinds=definite --log-file=.build/check-memory.valgrind.log \
	  .build/debug/fanoutPackageTests.xctest --testing-library swift-testing --filter UVLoopTests \
	  > .build/check-memory.tests.log 2>&1 || status=$$?; \
	grep -a 'Test run with' .build/check-memory.tests.log; \
	grep -E 'ERROR SUMMARY|definitely lost:|indirectly lost:' .build/check-memory.valgrind.log; \
	grep -aq 'Test run with [1-9][0-9]* tests* in .* passed' .build/check-memory.tests.log || status=1; \
	[ $$status -eq 0 ] || echo "check-memory failed: see .build/check-memory.valgrind.log"; \
	exit $$status

clean:
	rm -rf .build $(RUN_DIR)

# ---- Reliability: fuzzing, sanitizers (issue 7) ------------------------------------------------------
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= payload trace scenario
SANITIZER_ENV = LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan-suppressions.txt:print_suppressions=0 \
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
TSAN_TESTS ?= FanoutSimTests|UVLoopTests|FanoutCLITests
# The shortened `default` and `million` runs (2 h of virtual time for million) add no thread interaction the
# other simulation tests lack, and take 6 of the 8 minutes under ThreadSanitizer.
TSAN_SKIP ?= SimulationTests.shortened

.PHONY: fuzz fuzz-build test-sanitizers

## Build the libFuzzer targets (Fuzz/, a nested package kept out of the main build) with coverage and
## AddressSanitizer.
fuzz-build: deps
	cd Fuzz && $(SWIFT) build -c release -Xswiftc -sanitize=fuzzer,address

## Run each fuzz target (payload, trace, scenario) for FUZZ_SECONDS from its seed corpus (Fuzz/corpus/):
## prints executions and executions/s per target; fails on any crash, invariant failure or hang.
fuzz: fuzz-build
	@status=0; for t in $(FUZZ_TARGETS); do Fuzz/run.sh $$t $(FUZZ_SECONDS) || status=1; done; exit $$status

## The tests under AddressSanitizer (+ LeakSanitizer), then the multi-threaded ones (simulation workers,
## event-loop wakeups, `fanout run` through the CLI) under ThreadSanitizer. LeakSanitizer suppressions
## (toolchain libraries only, each explained) are in scripts/lsan-suppressions.txt; ThreadSanitizer has none.
test-sanitizers: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan \
	  --filter '$(TSAN_TESTS)' --skip '$(TSAN_SKIP)'

## `make check-memory` also runs a short multi-worker simulation under valgrind (this prerequisite):
## `fanout run smoke --duration 5 --workers 2` (debug build), no memory error and no definite leak.
## scripts/valgrind.supp silences two false positives inside the toolchain (Swift runtime metadata
## initialisation, Foundation's Process), each explained there. Logs: .build/check-memory.run.*.log.
.PHONY: check-memory-run
check-memory: check-memory-run
check-memory-run: deps
	@command -v valgrind >/dev/null 2>&1 || { echo "check-memory needs valgrind (apt-get install valgrind)"; exit 1; }
	$(SWIFT) build --product fanout
	@rm -rf .build/check-memory-run
	@status=0; \
	valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
	  --suppressions=$(CURDIR)/scripts/valgrind.supp --log-file=.build/check-memory.run.valgrind.log \
	  .build/debug/fanout run smoke --duration 5 --workers 2 --out .build/check-memory-run \
	  > .build/check-memory.run.log 2>&1 || status=$$?; \
	grep -aE '^(scenario|deliveries|identities) ' .build/check-memory.run.log; \
	grep -E 'ERROR SUMMARY|definitely lost:|indirectly lost:' .build/check-memory.run.valgrind.log; \
	grep -aq '^identities  hold' .build/check-memory.run.log || status=1; \
	[ $$status -eq 0 ] || echo "check-memory (fanout run) failed: see .build/check-memory.run.valgrind.log"; \
	exit $$status

# fanout — make run: set up and run the default job; make test: set up and run the tests.
SWIFT ?= swift
CONFIG ?= release
BIN = .build/$(CONFIG)/fanout
EXAMPLE_TRACE = reports/examples/game-night.trace.jsonl
RUN_DIR = reports/runs

.PHONY: run test deps build build-debug clean example-trace

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

build: deps
	$(SWIFT) build -c $(CONFIG) --product fanout

## Replay the example trace (until the simulation engine lands) and keep its dump under reports/runs/.
run: build
	@mkdir -p $(RUN_DIR)
	$(BIN) replay $(EXAMPLE_TRACE) --dump $(RUN_DIR)/game-night.dump.jsonl

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

clean:
	rm -rf .build $(RUN_DIR)

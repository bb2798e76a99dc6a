# mpcsim — build, test, benchmark, demo.
#   make [VARIANT=debug|release|san] [WERROR=1]   build build/$(VARIANT)/mpcsim
#   make check     run every Check suite (tests/check_*.c)
#   make bench     print benchmark figures
#   make demo      install deps if needed, run scenarios/quickstart.yaml, write db + plots
#   make install PREFIX=/usr/local   (binary, data, man page mpcsim.1, bash completion, the
#                  plug-in header include/mpcsim/policy_plugin.h and mpcsim-plugin.pc; DESTDIR)
#   make plugins   build every scenarios/plugins/*.c into build/plugins/*.so

VARIANT ?= release
# V=1 prints every command
V ?= 0
ifeq ($(V),1)
Q :=
else
Q := @
endif
PREFIX  ?= /usr/local
BUILD   := build/$(VARIANT)
PKGS    := gsl sqlite3 yaml-0.1 libssl libcrypto jansson
CC      ?= cc
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
# Where the installed binary finds models/, protocols/, scenarios/, scripts/ (the source tree when
# run from it; MPCSIM_DATA overrides at run time).
DATADIR ?= $(PREFIX)/share/mpcsim
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(PREFIX)/lib/pkgconfig

CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
                 -I. -MMD -MP \
                 -DMPCSIM_VERSION='"$(VERSION)"' -DMPCSIM_DATADIR='"$(DATADIR)"'
ifeq ($(WERROR),1)
CFLAGS_COMMON += -Werror
endif
ifeq ($(VARIANT),debug)
CFLAGS_VAR := -O0 -g3 -DMPCSIM_CHECKED
else ifeq ($(VARIANT),san)
CFLAGS_VAR := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
              -DMPCSIM_CHECKED
LDFLAGS_VAR := -fsanitize=address,undefined
else ifeq ($(VARIANT),release)
CFLAGS_VAR := -O2 -g -march=x86-64-v2
else
$(error VARIANT must be debug, release or san)
endif


PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

CFLAGS  := $(CFLAGS_COMMON) $(CFLAGS_VAR) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lpthread -lm -ldl
LDFLAGS := $(LDFLAGS_VAR) $(EXTRA_LDFLAGS)

# Every .c under the source folders (one level of rooms deep) belongs to the library except
# sim/cli/main.c (the CLI entry).
SRC_DIRS := protocols/base protocols/program protocols/backend models results \
            sim/engine sim/trace sim/policy sim/replay sim/scenario sim/serve sim/secure sim/figure \
            sim/cli
LIB_SRC  := $(filter-out sim/cli/main.c,$(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/check_*.c)
TEST_UTIL := $(filter-out tests/runner.c tests/check_% tests/bench_%,$(wildcard tests/*.c)) \
             tests/fuzz/targets.c
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(TEST_UTIL:%.c=$(BUILD)/%.o) $(BUILD)/tests/runner.o
BENCH_SRC := $(wildcard tests/bench_*.c)

.PHONY: all check bench demo clean install install-headers deps fuzz plugins
.SECONDARY:
all: $(BUILD)/mpcsim

$(BUILD)/mpcsim: $(BUILD)/sim/cli/main.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
	@ln -sf $(VARIANT)/mpcsim build/mpcsim

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

# The runner calls every <name>_suite() found in tests/check_*.c (generated list).
$(BUILD)/tests/suites.inc: $(TEST_SRC)
	@mkdir -p $(dir $@)
	@sed -n 's/^Suite \*\([a-z0-9_]*_suite\)(void).*/X(\1)/p' $(TEST_SRC) > $@.tmp && mv $@.tmp $@

$(BUILD)/tests/runner.o: tests/runner.c $(BUILD)/tests/suites.inc
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -I$(BUILD)/tests -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<

$(BUILD)/check_all: $(TEST_OBJ) $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

# Policy plug-ins: each scenarios/plugins/NAME.c, compiled with the public header alone (no
# -I. : a plug-in that reaches into the tree's private headers does not build).
PLUGIN_SRC := $(wildcard scenarios/plugins/*.c)
PLUGIN_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC -Iinclude
ifeq ($(WERROR),1)
PLUGIN_CFLAGS += -Werror
endif
plugins: $(PLUGIN_SRC:scenarios/plugins/%.c=build/plugins/%.so)

build/plugins/%.so: scenarios/plugins/%.c include/mpcsim/policy_plugin.h
	@mkdir -p $(dir $@)
	@echo "  PLUGIN  $@"
	$(Q)$(CC) $(PLUGIN_CFLAGS) -shared -o $@ $< -lm

# Tests run from the source tree; MPCSIM_BIN lets them drive the CLI as a user would.
check: $(BUILD)/check_all $(BUILD)/mpcsim plugins
	MPCSIM_BIN=$(CURDIR)/$(BUILD)/mpcsim MPCSIM_DATA=$(CURDIR) $(BUILD)/check_all

$(BUILD)/bench_%: $(BUILD)/tests/bench_%.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: $(BENCH_SRC:tests/%.c=$(BUILD)/%) $(BUILD)/mpcsim
	@for b in $(BENCH_SRC:tests/%.c=$(BUILD)/%); do echo "== $$b"; MPCSIM_BIN=$(CURDIR)/$(BUILD)/mpcsim MPCSIM_DATA=$(CURDIR) $$b || exit 1; done

# libFuzzer targets (tests/fuzz/): clang with ASan and UBSan, each run FUZZ_SECONDS on a copy of
# its seed corpus; a crash fails (scripts/fuzz.sh).
FUZZ_TARGETS := scenario model trace npy checkpoint tokenizer workload frames program yaml \
                resultsdb
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := $(CFLAGS_COMMON) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined $(PKG_CFLAGS)
FUZZ_OBJ     := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/tests/fuzz/targets.o

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (fuzz)"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/main.c $(FUZZ_OBJ)
	@echo "  LD      $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET=fuzz_$* -o $@ $^ $(LDLIBS) $(PKG_LIBS)

fuzz: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	MPCSIM_DATA=$(CURDIR) scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

deps:
	@scripts/install-deps.sh

demo:
	@scripts/install-deps.sh --if-missing
	@$(MAKE) --no-print-directory all
	MPCSIM_DATA=$(CURDIR) $(BUILD)/mpcsim run scenarios/quickstart.yaml -o results/quickstart.db --resume
	MPCSIM_DATA=$(CURDIR) $(BUILD)/mpcsim plot results/quickstart.db -o results/quickstart-plots
	MPCSIM_DATA=$(CURDIR) $(BUILD)/mpcsim run scenarios/eviction-study.yaml -o results/eviction-study.db --resume
	@echo "database: results/quickstart.db   plots: results/quickstart-plots/"
	@echo "eviction study: results/eviction-study.db   figures: results/eviction-study-plots/"

# The plug-in header and its pkg-config file (also alone: a plug-in's build needs no binary).
install-headers:
	install -d $(DESTDIR)$(INCLUDEDIR)/mpcsim $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/mpcsim/policy_plugin.h $(DESTDIR)$(INCLUDEDIR)/mpcsim/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    include/mpcsim-plugin.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/mpcsim-plugin.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/mpcsim-plugin.pc

install: $(BUILD)/mpcsim install-headers
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(DATADIR)
	install -m 755 $(BUILD)/mpcsim $(DESTDIR)$(PREFIX)/bin/mpcsim
	cp -r models protocols scenarios scripts $(DESTDIR)$(DATADIR)/
	install -d $(DESTDIR)$(DATADIR)/tests/data
	install -m 644 tests/data/tinystories_sample.txt $(DESTDIR)$(DATADIR)/tests/data/
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR)
	install -m 644 sim/cli/mpcsim.1 $(DESTDIR)$(MANDIR)/man1/mpcsim.1
	install -m 644 scripts/completion/mpcsim.bash $(DESTDIR)$(BASHCOMPDIR)/mpcsim

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/sim/cli/main.d

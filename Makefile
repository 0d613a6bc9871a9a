# gpubpf — one entry point: deps, build, test, demo, bench.
#   make            build build/gpubpf (and the CUDA pieces where CUDA is installed)
#   make deps       install the Debian packages the build and tests need
#   make test       deps + build + every test; last line "N passed, N failed[, N skipped]"
#   make demo       deps + build + profile the bundled demo workload and print a report
#   make bench      deps + build + overhead benchmarks (docs/BENCHMARKS.md)
#   make gpu-bundle the GPU check, carried to a machine with a GPU (tests/gpu/README.md)
#   make bench-agent  the agent's own CPU and RSS over a 10-minute run (docs/AGENT.md)
#   V=1             show full commands

ARCH ?= $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
BUILD ?= build
CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(shell test -x $(CUDA_HOME)/bin/nvcc && test -e $(CUDA_HOME)/lib64/libcudart.so && echo 1)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo 0.1.0)

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
PROTOC_C ?= protoc-c

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# Debian packages the build, tests, demo and benchmarks need.
DEB_PKGS := clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libprotobuf-c-dev \
	protobuf-c-compiler libjansson-dev golang-go pkg-config systemtap-sdt-dev libclang-rt-14-dev make \
	gcc g++ binutils elfutils procps python3 xz-utils linux-perf hyperfine \
	libcurl4-openssl-dev openssl

# userspace/'s layers, lowest first (see below)
LAYERS := lib sym model out trace cmd
WARN := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -fno-omit-frame-pointer -MMD -MP \
	-I$(BUILD) -I$(BUILD)/proto $(addprefix -Iuserspace/,$(LAYERS)) -Ibpf
# libcurl: the agent's uploads to Pyroscope (userspace/cmd/ingest.c).
LDLIBS := -lbpf -lelf -ldw -lz -lprotobuf-c -ljansson -lcurl -lstdc++ -lpthread -lm
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -Ivmlinux/$(ARCH) -Ibpf -I$(BUILD)

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

PROTO_C := $(BUILD)/proto/profile.pb-c.c
PROTO_H := $(BUILD)/proto/profile.pb-c.h

# userspace/ has one folder per layer, lowest first; a file includes headers of its own
# layer or lower ones only (docs/DESIGN.md, checked by tests/layers.py). Every source
# but cmd/main.c goes into a library that tests link too. Base names are unique.
vpath %.c $(addprefix userspace/,$(LAYERS))
LIB_SRCS := $(filter-out userspace/cmd/main.c,$(wildcard $(addprefix userspace/,$(LAYERS:=/*.c))))
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(notdir $(LIB_SRCS))) $(BUILD)/obj/profile.pb-c.o
SAN_OBJS := $(patsubst %.c,$(BUILD)/san/%.o,$(notdir $(LIB_SRCS))) $(BUILD)/san/profile.pb-c.o

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
UNIT_SAN_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/san/%,$(UNIT_SRCS))

# Workloads: plain C, and CUDA ones built by nvcc. -O0: every function keeps its frame
# (gcc 12 drops the frame of leaf functions at -O1 despite -mno-omit-leaf-frame-pointer),
# so BPF walks every caller.
WL_SRCS := $(wildcard tests/workloads/*.c)
WL_BINS := $(patsubst tests/workloads/%.c,$(BUILD)/workloads/%,$(WL_SRCS))
WL_CFLAGS := -std=gnu11 -O0 -g -fno-omit-frame-pointer -Wall -Werror -pthread

.PHONY: all deps test unit e2e demo bench bench-agent clean format tools static FORCE
.DEFAULT_GOAL := all
# Keep the sanitizer objects between runs (only they: a bare .SECONDARY would also let
# make skip rebuilding BPF objects and skeletons whose headers changed).
.SECONDARY: $(SAN_OBJS) $(BPF_OBJS) $(SKELS)

all: $(SKELS) $(BUILD)/gpubpf
tools: $(WL_BINS) $(UNIT_BINS) $(UNIT_SAN_BINS) $(BUILD)/gpubpf-san

# Fragments owned by their parts: each may add to DEB_PKGS, `tools`, and test prerequisites.
-include $(wildcard tests/workloads/cuda/Makefile.inc)
-include $(wildcard userspace/inject/Makefile.inc)
-include $(wildcard tests/browser/Makefile.inc)
-include $(wildcard tests/workloads/python/Makefile.inc)
-include $(wildcard tests/gpu/Makefile.inc)
-include $(wildcard tests/workloads/probe/Makefile.inc)

# libbpf 1.4 (bpf_link_create's uprobe_multi: userspace/trace/umulti.c) from Debian 12's
# backports; Debian 12 itself has 1.1.2. elfutils 0.192 from there too: 0.188's libdw reads
# past a malformed .debug_line of a target's file (tests/fuzz/fuzz_symobj.c finds it in
# seconds), and the symbolizer refuses DWARF from a libdw older than 0.192 (syms_dwarf.c).
BACKPORTS := /etc/apt/sources.list.d/gpubpf-bookworm-backports.list
LIBBPF_MIN := 1:1.4
ELFUTILS_MIN := 0.192

deps:
	$(Q)if ! dpkg -s $(DEB_PKGS) >/dev/null 2>&1; then \
		echo "  DEPS     installing Debian packages: $(DEB_PKGS)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $(DEB_PKGS) >/dev/null; \
	fi
	$(Q)if ! dpkg --compare-versions "$$(dpkg-query -W -f='$${Version}' libbpf-dev 2>/dev/null)" ge $(LIBBPF_MIN); then \
		echo "  DEPS     installing libbpf $(LIBBPF_MIN) or later from bookworm-backports"; \
		export DEBIAN_FRONTEND=noninteractive; \
		echo "deb http://deb.debian.org/debian bookworm-backports main" > $(BACKPORTS) && \
		apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends -t bookworm-backports libbpf-dev libbpf1 >/dev/null; \
	fi
	$(Q)if ! dpkg --compare-versions "$$(dpkg-query -W -f='$${Version}' libdw-dev 2>/dev/null)" ge $(ELFUTILS_MIN); then \
		echo "  DEPS     installing elfutils $(ELFUTILS_MIN) or later from bookworm-backports"; \
		export DEBIAN_FRONTEND=noninteractive; \
		echo "deb http://deb.debian.org/debian bookworm-backports main" > $(BACKPORTS) && \
		apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends -t bookworm-backports \
			libelf-dev libdw-dev libelf1 libdw1 elfutils >/dev/null; \
	fi

$(BUILD)/bpf $(BUILD)/obj $(BUILD)/san $(BUILD)/proto $(BUILD)/tests $(BUILD)/tests/san $(BUILD)/workloads:
	$(Q)mkdir -p $@

# --- BPF: CO-RE objects and skeletons -----------------------------------------------
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c vmlinux/$(ARCH)/vmlinux.h | $(BUILD)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -MT $@ -MF $(@:.o=.d) -c $< -o $@.tmp
	$(Q)llvm-strip -g $@.tmp -o $@ && rm -f $@.tmp

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# --- pprof protobuf -----------------------------------------------------------------
$(PROTO_C) $(PROTO_H) &: proto/profile.proto | $(BUILD)/proto
	$(call msg,PROTOC,$<)
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/proto $<

# --- userspace ----------------------------------------------------------------------
# The version the binaries and profiles say (git describe), in a header rewritten only
# when it changes: what includes it is rebuilt then, and only then (a -D flag left the
# objects built before a commit saying the commit before).
VERSION_H := $(BUILD)/version.h
$(VERSION_H): FORCE | $(BUILD)/obj
	$(Q)echo '#define GPUBPF_VERSION "$(VERSION)"' >$@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

$(BUILD)/obj/%.o: %.c $(SKELS) $(PROTO_H) | $(BUILD)/obj $(VERSION_H)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/profile.pb-c.o: $(PROTO_C) | $(BUILD)/obj
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 $(CFLAGS) -I$(BUILD)/proto -c $< -o $@

$(BUILD)/san/%.o: %.c $(SKELS) $(PROTO_H) | $(BUILD)/san $(VERSION_H)
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(BUILD)/san/profile.pb-c.o: $(PROTO_C) | $(BUILD)/san
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) -std=gnu11 $(CFLAGS) $(SAN_FLAGS) -I$(BUILD)/proto -c $< -o $@

$(BUILD)/gpubpf: $(BUILD)/obj/main.o $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# A static gpubpf (and the injection library beside it) to carry to a machine that has
# a GPU but not our build dependencies: tests/gpu/README.md. libdw's own dependencies
# (lzma, bzip2, zstd) must be named when linking it statically.
# libcurl has no static build of its own dependencies here: the static binary's agent
# writes files (--output-dir) and says so for --server.
static: $(BUILD)/gpubpf-static
$(BUILD)/obj/ingest-nocurl.o: userspace/cmd/ingest.c $(SKELS) $(PROTO_H) | $(BUILD)/obj $(VERSION_H)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -DGPUBPF_NO_CURL -c $< -o $@
# elfutils 0.192's static libraries lack its tsearch wrappers: userspace/static/eu_search.c,
# linked with them wherever libelf is linked statically (here and ret_delay).
$(BUILD)/obj/eu_search.o: userspace/static/eu_search.c | $(BUILD)/obj
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@
STATIC_ELF_LIBS := $(BUILD)/obj/eu_search.o -lelf -lz -llzma -lbz2 -lzstd
$(BUILD)/gpubpf-static: $(BUILD)/obj/main.o $(filter-out $(BUILD)/obj/ingest.o,$(LIB_OBJS)) $(BUILD)/obj/ingest-nocurl.o \
		$(BUILD)/obj/eu_search.o
	$(call msg,LINK,$@)
	$(Q)$(CC) -static $(CFLAGS) $(filter-out $(BUILD)/obj/eu_search.o,$^) $(filter-out -lcurl,$(LDLIBS)) \
		$(STATIC_ELF_LIBS) -o $@ 2>&1 | \
		{ grep -v 'statically linked applications requires at runtime\|in function' || true; }
	$(Q)test -x $@

# gpubpf itself under ASan and UBSan: tests/e2e/83_sanitized.sh records real jobs with it
# (a heap race in gpubpf showed once in 12 runs as it is, at once under ASan).
$(BUILD)/gpubpf-san: $(BUILD)/san/main.o $(SAN_OBJS)
	$(call msg,LINK-SAN,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $^ $(LDLIBS) -o $@

# --- tests --------------------------------------------------------------------------
$(BUILD)/tests/%: tests/unit/%.c tests/unit/test.h $(LIB_OBJS) | $(BUILD)/tests
	$(call msg,CC-TEST,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit $< $(LIB_OBJS) $(LDLIBS) -o $@

$(BUILD)/tests/san/%: tests/unit/%.c tests/unit/test.h $(SAN_OBJS) | $(BUILD)/tests/san
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -Itests/unit $< $(SAN_OBJS) $(LDLIBS) -o $@

$(BUILD)/workloads/%: tests/workloads/%.c tests/workloads/wl_common.h Makefile | $(BUILD)/workloads
	$(call msg,CC-WL,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@

unit: deps all $(UNIT_BINS) $(UNIT_SAN_BINS)
	$(Q)BUILD=$(BUILD) tests/run.sh unit

test: deps all tools
	$(Q)BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) HAVE_CUDA=$(HAVE_CUDA) tests/run.sh all

e2e: deps all tools
	$(Q)BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) HAVE_CUDA=$(HAVE_CUDA) tests/run.sh e2e

demo: deps all tools
	$(Q)BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) HAVE_CUDA=$(HAVE_CUDA) tests/demo.sh

bench: deps all tools
	$(Q)BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) HAVE_CUDA=$(HAVE_CUDA) tests/bench.sh

# The agent's own CPU and RSS over 10 minutes of CUDA jobs coming and going (also in
# make bench with BENCH_AGENT=1; BENCH_AGENT_SECONDS shortens it).
bench-agent: deps all tools
	$(Q)BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) python3 tests/bench_agent.py

format:
	clang-format -i bpf/*.c bpf/*.h userspace/*/*.c userspace/*/*.h tests/unit/*.c tests/unit/*.h tests/workloads/*.c

clean:
	rm -rf $(BUILD)

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/san/*.d $(BUILD)/bpf/*.d $(BUILD)/tests/*.d $(BUILD)/tests/san/*.d)

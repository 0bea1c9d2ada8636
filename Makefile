# gpuslice: the everyday verbs. CMake does the building; this file only drives it.
#   make          build everything (installs Debian deps first if missing)
#   make test     build and run the whole test suite (CTest)
#   make asan     the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz     build the libFuzzer targets and run each for FUZZ_SECONDS on its corpus
#                 (every other build links them with fuzz/standalone.c; CTest replays seeds)
#   make bench    run the benchmarks; JSON lines on stdout, also in build/bench.json
#   make demo     replay the seed's production incident on fake nodes
#   make check    clang-format, clang-tidy (.clang-tidy), scripts/check-style and
#                 scripts/check-graph (no circle between the files of src/)
#   make image    an OCI image archive (build/gpuslice-image.tar) without docker
#   make e2e      the real-node lane: Kubernetes 1.20 built from Debian (docs/e2e.md)
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure test asan fuzz bench demo clean format check

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps --check >/dev/null 2>&1 || scripts/install-deps

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan: deps
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -DGS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS)

fuzz: deps
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=clang cmake -S . -B $(FUZZ_BUILD) -DGS_FUZZ=ON $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	scripts/run-fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: all
	scripts/run-bench $(BUILD)

demo: all
	scripts/demo $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Style gates, run by .ci/run. clang-tidy needs the build's compile database and generated
# protobuf headers, hence `all`.
check: all
	@clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h') || \
		{ echo "make check: clang-format differs; run 'make format' and commit" >&2; exit 1; }
	@out=$$(git ls-files 'src/*.c' | xargs -P $(JOBS) -n 8 clang-tidy -p $(BUILD) -quiet 2>&1 | \
		grep -E 'warning:|error:'); \
	if [ -n "$$out" ]; then echo "$$out"; echo "make check: clang-tidy findings above" >&2; exit 1; fi
	@scripts/check-style
	@scripts/check-graph src

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

# image-rootfs: the container image's runtime root filesystem, without docker, in
# $(BUILD)/rootfs (deployments/container: the Dockerfile and this read one package list).
.PHONY: image-rootfs
image-rootfs: all
	scripts/image-rootfs $(BUILD)

# image: the image as an OCI archive, without docker or buildah: the rootfs above packed by
# scripts/image-oci into $(BUILD)/gpuslice-image.tar, named $(IMAGE), the version and commit
# in its labels. `ctr -n k8s.io images import`, `podman load -i` and `docker load -i` take it.
VERSION = $(shell awk '/^project.gpuslice VERSION/ {print $$3}' CMakeLists.txt)
IMAGE ?= localhost/gpuslice:$(VERSION)
.PHONY: image
image: image-rootfs
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} \
	scripts/image-oci $(BUILD)/rootfs $(BUILD)/gpuslice-image.tar --name $(IMAGE) \
		--version $(VERSION) --revision "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		--arch "$$(dpkg --print-architecture)"

# e2e: the real-node lane (tests/e2e, docs/e2e.md): builds and caches Kubernetes 1.20.2 from
# Debian's source package on first use (tens of minutes), starts a one-node cluster in a
# private mount namespace, applies every overlay with kubectl and checks what a real kubelet
# and API server do. Needs root. Not part of `make test` or CI.
.PHONY: e2e
e2e: image
	tests/e2e/run $(BUILD)

#!/usr/bin/env bash
# Install what dta needs on a Debian machine with Rust (rustup) and Python 3 present: Debian
# packages with apt-get, Python tools into .venv. Idempotent; quiet when all is there.
#
#   scripts/setup.sh           everything the tests use (scripts/test.sh runs this)
#   scripts/setup.sh --demo    only what building dta and running the demo needs: a C toolchain
#                              (scripts/demo.sh runs this; no browser, JDK, ns-3 or clang)
#   --print                    say which Debian packages the profile needs, install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

demo=0 print=0
for a in "$@"; do
    case $a in
        --demo) demo=1 ;;
        --print) print=1 ;;
        *) echo "setup: unknown option $a (--demo, --print)" >&2; exit 2 ;;
    esac
done

# `have CHECK...`: with --print every package is listed, as if none were installed.
have() { [ "$print" = 0 ] && "$@" >/dev/null 2>&1; }

# Install the packages of need_apt (none: nothing to do).
apt_install() {
    [ ${#need_apt[@]} -gt 0 ] || return 0
    echo "setup: apt-get install ${need_apt[*]}" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
}

need_apt=()
have command -v cc || need_apt+=(build-essential)
have command -v make || need_apt+=(make)
have command -v pkg-config || need_apt+=(pkg-config)
if [ "$demo" = 1 ]; then
    if [ "$print" = 1 ]; then echo "${need_apt[*]}"; exit 0; fi
    apt_install
    command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found: install Rust with rustup first" >&2; exit 1; }
    exit 0
fi
have python3 -c 'import venv, ensurepip' || need_apt+=(python3-venv)
# The test suite links over a hundred test binaries of tens of MB each; mold links them in a
# fraction of GNU ld's time (scripts/test.sh uses it where it is installed).
have command -v mold || need_apt+=(mold)
# rdma-core headers for `--features rdma-core` (dta-rnic, `dta rnic-collector`; docs/rdma.md).
# Small, so installed by default; DTA_RDMA_CORE=0 skips them (the default build never needs them).
if [ "${DTA_RDMA_CORE:-1}" != 0 ]; then
    have pkg-config --exists libibverbs librdmacm || need_apt+=(libibverbs-dev librdmacm-dev)
    have dpkg -s libclang-dev || need_apt+=(libclang-dev)
    have command -v ibv_devices || need_apt+=(ibverbs-utils)
fi
# The XDP translator (crates/engines/dta-xdp, docs/xdp.md): clang compiles bpf/dta_xdp.bpf.c against
# libbpf's headers (bpf/bpf_helpers.h) and the kernel UAPI headers.
have command -v clang || need_apt+=(clang llvm)
have test -f /usr/include/bpf/bpf_helpers.h || need_apt+=(libbpf-dev)
have test -f /usr/include/linux/bpf.h || need_apt+=(linux-libc-dev)
have command -v ip || need_apt+=(iproute2)
# The XDP tests turn GRO on at a veth peer (native XDP on veth sees frames only then).
have command -v ethtool || need_apt+=(ethtool)
# scripts/faults.sh plots the overload case (docs/img/overload.png) with the system Python's
# matplotlib.
have /usr/bin/python3 -c 'import matplotlib' || need_apt+=(python3-matplotlib)
# The Redis export's tests start a real redis-server (docs/exports.md).
have command -v redis-server || need_apt+=(redis-server)
# The InvisiFlow simulation (sim/, docs/embedding.md): Debian's ns-3 3.37 and what it links
# (GSL), built with CMake and g++. DTA_NS3=0 skips them (the smoke run is then skipped, counted).
if [ "${DTA_NS3:-1}" != 0 ]; then
    have dpkg -s libns3-dev || need_apt+=(libns3-dev)
    have dpkg -s libgsl-dev || need_apt+=(libgsl-dev)
    have command -v cmake || need_apt+=(cmake)
    have command -v g++ || need_apt+=(g++)
fi
# The Kafka export's tests run a single-node Apache Kafka broker (KRaft) with Java 17 from the
# jars Maven resolves below (docs/kafka.md). DTA_KAFKA=0 skips both.
if [ "${DTA_KAFKA:-1}" != 0 ]; then
    have command -v java || need_apt+=(openjdk-17-jre-headless)
    have command -v mvn || need_apt+=(maven)
fi
# The metrics expositions are checked by Prometheus's own linter (promtool check metrics).
have command -v promtool || need_apt+=(prometheus)
# The InfluxDB export's test writes to a real InfluxDB over its HTTP API (docs/exports.md).
have command -v influxd || need_apt+=(influxdb)
# The web console's browser tests drive headless Chromium through chromedriver (docs/console.md).
have command -v chromium || need_apt+=(chromium)
have command -v chromedriver || need_apt+=(chromium-driver)
if [ "$print" = 1 ]; then echo "${need_apt[*]}"; exit 0; fi
apt_install

# The Kafka broker's jars from Maven Central (scripts/kafka/pom.xml) into the directory
# dta_testkit::kafka reads: $DTA_KAFKA_LIBS, else ~/.cache/dta/kafka/libs. Resolved again when
# the pom changes (its checksum is kept beside the jars).
if [ "${DTA_KAFKA:-1}" != 0 ]; then
    kafka_libs=${DTA_KAFKA_LIBS:-$HOME/.cache/dta/kafka/libs}
    kafka_pom_sum=$(sha256sum scripts/kafka/pom.xml | cut -d' ' -f1)
    if [ "$(cat "$kafka_libs/.pom.sha256" 2>/dev/null)" != "$kafka_pom_sum" ]; then
        echo "setup: resolving the Kafka broker's jars into $kafka_libs (Maven)" >&2
        rm -rf "$kafka_libs"
        mvn -q -B -f scripts/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$kafka_libs" >&2
        echo "$kafka_pom_sum" >"$kafka_libs/.pom.sha256"
    fi
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found: install Rust with rustup first" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt clippy >/dev/null 2>&1 || true
# Fuzzing (fuzz/run.sh) needs a nightly toolchain and cargo-fuzz. Installed in CI, where the
# fuzz run is required (scripts/test.sh), or when DTA_FUZZ=1; elsewhere test.sh counts it skipped.
if [ "${CI:-}" = true ] || [ "${DTA_FUZZ:-0}" = 1 ]; then
    rustup toolchain list 2>/dev/null | grep -q '^nightly' \
        || rustup toolchain install nightly --profile minimal >/dev/null
    cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install --quiet --locked cargo-fuzz
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-dev.txt

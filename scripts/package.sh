#!/usr/bin/env bash
# Build the Debian package of dta (and the Python wheels):
#
#   scripts/package.sh [--bin PATH] [--out DIR] [--no-wheels]
#
# The .deb is assembled with dpkg-deb from packaging/ (not cargo-deb: dpkg-deb is on every Debian
# machine, needs no crate compiled from crates.io, and takes any already-built binary, so the
# test suite packages the debug binary it has just built instead of a release build):
#   /usr/bin/dta                                    the binary (stripped; its debug information
#                                                   beside the .deb as dta_VERSION_ARCH.debug,
#                                                   linked by .gnu_debuglink)
#   /lib/systemd/system/dta-*.service               collector, translator (UDP; XDP template),
#                                                   INT sink (packaging/systemd/)
#   /etc/dta/dta.toml, /etc/dta/int-sink.toml       conffiles: examples/*.toml with region_dir
#                                                   /var/lib/dta (/var/lib/dta/int)
#   /usr/share/man/man1/dta*.1.gz                   `dta generate man`  (clap_mangen)
#   /usr/share/{bash-completion,zsh,fish}/...       `dta generate completions` (clap_complete)
#   /usr/share/doc/dta/{copyright,README.md,examples/}
#   /usr/share/dta/schemas/                         the contracts others build on: dta.proto and
#                                                   json/ (Kafka records), clickhouse/ (DDL),
#                                                   openapi/ (HTTP), examples/ (consumers)
# The maintainer scripts (packaging/debian/) create the `dta` system user and /var/lib/dta.
#
# --bin PATH   package this binary (default: `cargo build --release -p dta`, minutes on a
#              cold tree; with --bin, packaging takes a few seconds)
# --out DIR    where the .deb and wheels/ go (default target/package)
# --no-wheels  skip the Python wheels (`maturin build --release`, a release build of
#              python/; the package is dta-telemetry, import name dta); their native module is
#              stripped too, its debug information beside each wheel (WHEEL.debug)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

bin=""
out=$ROOT/target/package
wheels=1
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-wheels) wheels=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

for tool in dpkg-deb dpkg gzip; do
    command -v "$tool" >/dev/null 2>&1 || { echo "package.sh: $tool missing (a Debian machine?)" >&2; exit 1; }
done

if [ -z "$bin" ]; then
    echo "package.sh: cargo build --release -p dta" >&2
    cargo build --release -q -p dta
    bin=${CARGO_TARGET_DIR:-$ROOT/target}/release/dta
fi
[ -x "$bin" ] || { echo "package.sh: $bin is not an executable" >&2; exit 1; }

# The version is the workspace's (Cargo.toml [workspace.package]), as `dta --version` prints it.
version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/dta" \
    "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
    "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d" \
    "$root/usr/share/doc/dta/examples" "$root/usr/share/dta/schemas"

# The binary, without its debug information, which is kept beside the package (binutils'
# objcopy: a debugger finds it through the .gnu_debuglink it adds).
command -v objcopy >/dev/null 2>&1 || { echo "package.sh: objcopy missing (binutils)" >&2; exit 1; }
debug_file=$out/dta_${version}_${arch}.debug
objcopy --only-keep-debug "$bin" "$debug_file"
objcopy --strip-debug --add-gnu-debuglink="$debug_file" "$bin" "$root/usr/bin/dta"
chmod 755 "$root/usr/bin/dta"

install -m 644 packaging/systemd/*.service "$root/lib/systemd/system/"

# Conffiles: the annotated examples, their region directory set to the package's; the collector
# shows the translator's and INT sink's counters (the services' --metrics addresses) and serves
# the INT sink's stores read-only beside its own (the example names them int_*, so that they
# never clash with the collector's; /int/... finds the INT stores by layout).
sed -E -e 's|^region_dir = "[^"]*"|region_dir = "/var/lib/dta"|' \
    -e 's|^# (translator_metrics = "127.0.0.1:9464")|\1|' \
    -e 's|^# (int_sink_metrics = "127.0.0.1:9465")|\1|' \
    -e 's|^# serve_read_only = \[[^]]*\]|serve_read_only = ["/var/lib/dta/int"]|' \
    examples/dta.toml >"$root/etc/dta/dta.toml"
sed -E -e 's|^region_dir = "[^"]*"( *#.*)?$|region_dir = "/var/lib/dta/int"|' \
    examples/int-sink.toml >"$root/etc/dta/int-sink.toml"
grep -q '^region_dir = "/var/lib/dta"$' "$root/etc/dta/dta.toml"
grep -q '^translator_metrics = "127.0.0.1:9464"' "$root/etc/dta/dta.toml"
grep -q '^int_sink_metrics = "127.0.0.1:9465"' "$root/etc/dta/dta.toml"
grep -q '^serve_read_only = \["/var/lib/dta/int"\]' "$root/etc/dta/dta.toml"
grep -q '^region_dir = "/var/lib/dta/int"$' "$root/etc/dta/int-sink.toml"
[ "$(grep -c '^name = "int_' "$root/etc/dta/int-sink.toml")" = 5 ]
# The receive buffers the services ask for (recv_buffer, 64 MiB by default): unprivileged
# services are capped by net.core.rmem_max, which the package raises (applied at install).
install -d "$root/usr/lib/sysctl.d"
printf '# dta: the receive buffer dta translator and dta int-sink ask for (recv_buffer,\n# 64 MiB by default); without it they are capped and warn at every start.\nnet.core.rmem_max = 67108864\n' \
    >"$root/usr/lib/sysctl.d/60-dta.conf"
chmod 644 "$root/usr/lib/sysctl.d/60-dta.conf"
chmod 644 "$root/etc/dta/"*.toml
# Both validate as the services will read them.
"$bin" check --config "$root/etc/dta/dta.toml" >/dev/null

# Man pages and completions from the CLI definition.
"$bin" generate man "$work/man" 2>/dev/null
for p in "$work/man"/*.1; do
    gzip -9n <"$p" >"$root/usr/share/man/man1/$(basename "$p").gz"
done
"$bin" generate completions "$work/completions" 2>/dev/null
install -m 644 "$work/completions/dta.bash" "$root/usr/share/bash-completion/completions/dta"
install -m 644 "$work/completions/_dta" "$root/usr/share/zsh/vendor-completions/_dta"
install -m 644 "$work/completions/dta.fish" "$root/usr/share/fish/vendor_completions.d/dta.fish"
chmod 644 "$root/usr/share/man/man1/"*.gz

# Documentation: the machine-readable copyright file (DEP-5) carrying the LICENSE.
{
    printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
    printf 'Upstream-Name: dta\n\nFiles: *\nCopyright: the dta authors\nLicense: Apache-2.0\n'
    sed -e 's/^[[:space:]]*$/./' -e 's/^/ /' LICENSE
} >"$root/usr/share/doc/dta/copyright"
install -m 644 README.md "$root/usr/share/doc/dta/README.md"
install -m 644 examples/*.toml "$root/usr/share/doc/dta/examples/"
for d in . json clickhouse openapi examples; do
    install -d "$root/usr/share/dta/schemas/$d"
    find "schemas/$d" -maxdepth 1 -type f -exec install -m 644 {} "$root/usr/share/dta/schemas/$d/" \;
done

# Control files.
install -m 755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
printf '/etc/dta/dta.toml\n/etc/dta/int-sink.toml\n' >"$root/DEBIAN/conffiles"
depends="passwd"
if command -v dpkg-shlibdeps >/dev/null 2>&1; then
    # dpkg-shlibdeps wants a debian/control beside it.
    mkdir -p "$work/shlibs/debian"
    printf 'Source: dta\n\nPackage: dta\nArchitecture: any\n' >"$work/shlibs/debian/control"
    shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/dta" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
    [ -n "$shlibs" ] && depends="$shlibs, $depends"
else
    depends="libc6, $depends"
fi
installed=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: dta
Version: $version
Architecture: $arch
Maintainer: dta maintainers <dta@example.invalid>
Installed-Size: $installed
Depends: $depends
Section: net
Priority: optional
Homepage: https://example.invalid/dta
Description: Direct Telemetry Access: collect switch telemetry into queryable memory
 The dta collector keeps telemetry in memory-mapped stores (Key-Write, Key-Increment,
 Postcarding, Append, Sketch-Merge) and answers queries over HTTP; the translator writes
 DTA reports into them, the INT sink INT telemetry reports. systemd units for the three,
 running as the dta user with state in /var/lib/dta.
CONTROL

deb=$out/dta_${version}_${arch}.deb
# gzip: a few seconds of CPU for the ~30 MB tree; xz would add some 15 s for a smaller file.
dpkg-deb --root-owner-group -Zgzip --build "$root" "$deb" >/dev/null
echo "$deb"

# Strip the native modules of wheel $1 in place, their debug information into $1.debug (one
# file: wheels carry one native module), and rewrite the wheel's RECORD with the new hashes.
split_wheel() {
    local whl=$1 dir
    dir=$(mktemp -d)
    (cd "$dir" && python3 -m zipfile -e "$whl" .)
    local so
    for so in $(cd "$dir" && find . -name '*.so'); do
        objcopy --only-keep-debug "$dir/$so" "$whl.debug"
        objcopy --strip-debug --add-gnu-debuglink="$whl.debug" "$dir/$so"
    done
    python3 - "$dir" <<'PY'
import base64, csv, hashlib, os, sys
root = sys.argv[1]
record = next(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f == "RECORD")
rows = []
with open(record, newline="") as f:
    for path, digest, size in csv.reader(f):
        full = os.path.join(root, path)
        if digest and os.path.isfile(full):
            data = open(full, "rb").read()
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            digest, size = f"sha256={h}", str(len(data))
        rows.append((path, digest, size))
with open(record, "w", newline="") as f:
    csv.writer(f).writerows(rows)
PY
    rm -f "$whl"
    (cd "$dir" && python3 -m zipfile -c "$whl" $(ls -A))
    rm -rf "$dir"
}

if [ "$wheels" = 1 ]; then
    maturin=${MATURIN:-$ROOT/.venv/bin/maturin}
    [ -x "$maturin" ] || maturin=$(command -v maturin || true)
    [ -n "$maturin" ] || { echo "package.sh: maturin missing (scripts/setup.sh installs it into .venv)" >&2; exit 1; }
    "$maturin" build --release -m python/Cargo.toml --out "$out/wheels" >&2
    for whl in "$out/wheels"/*.whl; do
        split_wheel "$whl"
    done
    ls "$out/wheels"/*.whl
fi

//! Compiles bpf/dta_xdp.bpf.c with clang into OUT_DIR/dta_xdp.o (scripts/setup.sh installs clang
//! and libbpf-dev). Without clang the crate still builds: the object is empty, `dta --version`
//! and `dta check` say the XDP programs were left out, and loading one fails at run time with a
//! clear message. The script runs again when the compiler appears or changes: it watches the
//! resolved compiler, or, while there is none, every directory of `PATH` (installing clang
//! changes `/usr/bin`), so a build after `scripts/setup.sh` compiles the programs.
//! The rules' bounds and counter indices reach the C source as `-D` defines generated from
//! crates/engines/dta-translator/src/rules/limits.rs, and the INT fast path's sequence-number
//! mask and reordering window from crates/engines/dta-int/src/cache.rs (one definition for both
//! sides).
use std::path::PathBuf;
use std::process::Command;

/// The Rust sources some of the C sources' bounds are read from ([`rust_const`]).
const INT_CACHE: &str = "../dta-int/src/cache.rs";
const WIRE_PREFIX: &str = "../../wire/dta-wire/src/prefix.rs";

#[allow(dead_code)]
mod limits {
    include!("../dta-translator/src/rules/limits.rs");
}

/// `pub const NAME: TY = VALUE;` of the Rust source at `path` (relative to this crate) as a C
/// expression: read from its one definition, since the crates defining these cannot be included
/// here (they have dependencies of their own). VALUE must be a literal or a shift (`1 << N`);
/// Rust's digit separators are dropped.
fn rust_const(path: &str, name: &str, ty: &str) -> String {
    let src = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let v = src
        .lines()
        .find_map(|l| l.strip_prefix(&format!("pub const {name}: {ty} = ")))
        .map(|v| v.trim_end_matches(';').replace('_', ""))
        .unwrap_or_else(|| panic!("{path} defines {name}: {ty}"));
    assert!(
        v.chars()
            .all(|c| c.is_ascii_alphanumeric() || " <()".contains(c)),
        "{path}: {name} = {v}: not a literal or a shift"
    );
    format!("({v})")
}

/// `-D` defines for the C sources: the rule bounds, the `RC_*` counter indices, the
/// allow-list's size and the INT fast path's sequence-number mask and reordering window.
fn defines() -> Vec<String> {
    let mut d = vec![
        // dta_int::cache: the sequence-number mask and reordering window the INT fast path
        // orders reports by; dta_wire::prefix: the allow-list's size.
        format!(
            "-DDTA_SEQ_MASK={}",
            rust_const(INT_CACHE, "SEQ_MASK", "u32")
        ),
        format!(
            "-DDTA_REORDER_WINDOW={}",
            rust_const(INT_CACHE, "REORDER_WINDOW", "u32")
        ),
        format!(
            "-DDTA_MAX_PREFIXES={}",
            rust_const(WIRE_PREFIX, "MAX_PREFIXES", "usize")
        ),
        format!("-DDTA_MAX_RULES={}", limits::MAX_RULES),
        format!("-DDTA_MAX_FIELDS={}", limits::MAX_FIELDS),
        format!("-DDTA_MAX_KEY={}", limits::MAX_KEY),
        format!("-DDTA_MAX_DATA={}", limits::MAX_DATA),
        format!("-DRC_COUNT={}", limits::RuleCounter::ALL.len()),
    ];
    for (i, c) in limits::RuleCounter::ALL.iter().enumerate() {
        d.push(format!("-DRC_{}={i}", c.name().to_uppercase()));
    }
    d
}

/// The compiler: `DTA_BPF_CLANG`, else `clang` found on `PATH` (resolved through links).
fn find_clang() -> (String, Option<PathBuf>) {
    let name = std::env::var("DTA_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let found = if name.contains('/') {
        Some(PathBuf::from(&name)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(&name))
                .find(|p| p.is_file())
        })
    };
    (name, found.map(|p| p.canonicalize().unwrap_or(p)))
}

fn main() {
    println!("cargo:rerun-if-env-changed=DTA_BPF_CLANG");
    println!("cargo:rerun-if-env-changed=PATH");
    match find_clang() {
        (_, Some(clang)) => println!("cargo:rerun-if-changed={}", clang.display()),
        (_, None) => {
            for dir in std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .filter(|d| d.is_dir())
            {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
        }
    }
    // The drop-only baseline of benchmark 4 (crates/engines/dta-xdp/src/drop.rs).
    compile("xdp_drop");
    compile("dta_xdp");
    // The INT sink's fast path (crates/engines/dta-xdp/src/int.rs).
    compile("int_xdp");
    // Kernel-bypass receive: the AF_XDP redirect (crates/engines/dta-xdp/src/xsk.rs).
    compile("xsk_redirect");
}

fn compile(name: &str) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let src = manifest.join(format!("../../../bpf/{name}.bpf.c"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join(format!("{name}.o"));
    println!("cargo:rerun-if-changed={}", src.display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest
            .join("../dta-translator/src/rules/limits.rs")
            .display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("../../../bpf/allow.h").display()
    );
    for read in [WIRE_PREFIX, INT_CACHE] {
        println!("cargo:rerun-if-changed={}", manifest.join(read).display());
    }
    let (clang, _) = find_clang();
    let arch_inc = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let status = Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .arg(format!("-I{arch_inc}"))
        .args(defines())
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed to compile {} ({s})", src.display()),
        Err(e) => {
            println!(
                "cargo:warning=dta-xdp: {clang} not found ({e}); the XDP program is not built \
                 (run scripts/setup.sh)"
            );
            std::fs::write(&out, b"").unwrap();
        }
    }
}

//! Compiles bpf/dta_xdp.bpf.c with clang into OUT_DIR/dta_xdp.o (scripts/setup.sh installs clang
//! and libbpf-dev). Without clang the crate still builds: the object is empty and loading the XDP
//! program fails at run time with a clear message.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    // The drop-only baseline of benchmark 4 (crates/dta-xdp/src/drop.rs).
    compile("xdp_drop");
    compile("dta_xdp");
    // The INT sink's fast path (crates/dta-xdp/src/int.rs).
    compile("int_xdp");
}

fn compile(name: &str) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let src = manifest.join(format!("../../bpf/{name}.bpf.c"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join(format!("{name}.o"));
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=DTA_BPF_CLANG");
    let clang = std::env::var("DTA_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let arch_inc = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let status = Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .arg(format!("-I{arch_inc}"))
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

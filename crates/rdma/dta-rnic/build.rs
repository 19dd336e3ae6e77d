//! With the `rdma-core` feature, compile `csrc/layout.c` against the installed rdma-core headers
//! so the tests can compare the Rust struct layouts with C's. Without it, nothing.
fn main() {
    println!("cargo:rerun-if-changed=csrc/layout.c");
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "rdma-core")]
    cc::Build::new()
        .file("csrc/layout.c")
        .warnings(true)
        .compile("dta_rnic_layout");
}

//! With the `rdma-core` feature: the binding links and runs against the installed libibverbs /
//! librdmacm. On a machine without RDMA devices (this project's CI: no device, no RDMA
//! subsystem in the kernel) it proves that much and that the collector fails with a clear
//! message; on a machine with a device it checks the device list is non-empty.
#![cfg(feature = "rdma-core")]

use dta_collector::{Collector, StoreConfig};
use dta_rnic::rnic::{device_names, RnicCollector, RnicError};
use dta_rnic::RnicConfig;

fn sysfs_devices() -> usize {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn ibv_get_device_list_runs_and_agrees_with_sysfs() {
    let sysfs = sysfs_devices();
    let kernel_has_rdma = std::path::Path::new("/sys/class/infiniband_verbs").exists();
    match device_names() {
        Ok(names) if sysfs == 0 => {
            assert!(names.is_empty(), "libibverbs sees {names:?} but sysfs none");
            eprintln!("RDMA subsystem but no device: ibv_get_device_list returned an empty list");
        }
        Ok(names) => assert_eq!(names.len(), sysfs, "devices {names:?}"),
        Err(RnicError::NoSubsystem) => {
            assert!(
                !kernel_has_rdma,
                "ENOSYS although the kernel has RDMA support"
            );
            assert_eq!(sysfs, 0);
            eprintln!("no RDMA subsystem here: ibv_get_device_list failed with ENOSYS (expected)");
        }
        Err(e) => panic!("ibv_get_device_list: {e}"),
    }
}

#[test]
fn without_a_device_the_collector_fails_clearly() {
    if std::path::Path::new("/dev/infiniband/rdma_cm").exists() && sysfs_devices() > 0 {
        dta_testkit::skip!("this machine has an RDMA device; the failure path is not reachable");
    }
    let dir = tempfile::tempdir().unwrap();
    let kw: StoreConfig = toml::from_str(
        "name = 'kw'\nkind = 'key-write'\nslots = 1024\nkey_len = 4\ndata_len = 4\n",
    )
    .unwrap();
    let c = Collector::create(dir.path(), &[kw], false).unwrap();
    let cfg = RnicConfig {
        listen: "127.0.0.1:7471".parse().unwrap(),
        ..RnicConfig::default()
    };
    let e = RnicCollector::new(cfg, &c)
        .err()
        .expect("no device: must fail");
    let msg = e.to_string();
    assert!(msg.starts_with("rdma_"), "names the failing call: {msg}");
    assert!(msg.contains("ibv_devices"), "tells what to check: {msg}");
    eprintln!("as expected here: {msg}");
}

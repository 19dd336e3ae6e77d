//! The skip mechanism and the seed, observed from outside: each case runs this test binary
//! again as a child with the environment under test, so the process-wide variables of one case
//! cannot leak into another.

use std::process::Command;

fn child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    c.env_remove("DTA_SKIP_LOG")
        .env_remove("DTA_REQUIRE_ALL")
        .env_remove("DTA_TEST_SEED")
        .env("DTA_TESTKIT_CHILD", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Only does something when run as a child: skips, then would fail if `skip!` did not return.
#[test]
fn child_that_skips() {
    if std::env::var_os("DTA_TESTKIT_CHILD").is_none() {
        return;
    }
    dta_testkit::skip!("no {} here", "frobnicator");
    #[allow(unreachable_code)]
    {
        panic!("skip! did not return");
    }
}

#[test]
fn child_that_seeds() {
    if std::env::var_os("DTA_TESTKIT_CHILD").is_none() {
        return;
    }
    println!("seed={}", dta_testkit::test_seed(7));
}

#[test]
fn skip_prints_logs_and_returns() {
    let dir = std::env::temp_dir().join(format!("dta-testkit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("skips");
    let _ = std::fs::remove_file(&log);
    let log_s = log.to_str().unwrap();
    for _ in 0..2 {
        let out = child("child_that_skips", &[("DTA_SKIP_LOG", log_s)]);
        assert!(out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("dta-test: SKIPPED skip::child_that_skips: no frobnicator here"),
            "{err}"
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged,
        "dta-test: SKIPPED skip::child_that_skips: no frobnicator here\n".repeat(2)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn skip_without_log_still_prints() {
    let out = child("child_that_skips", &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("dta-test: SKIPPED"));
}

#[test]
fn require_all_turns_a_skip_into_a_failure() {
    let out = child("child_that_skips", &[("DTA_REQUIRE_ALL", "1")]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not allowed: DTA_REQUIRE_ALL=1"), "{err}");
}

#[test]
fn seed_defaults_parses_and_rejects() {
    let s = |env: &[(&str, &str)]| {
        let o = child("child_that_seeds", env);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (ok, out) = s(&[]);
    assert!(ok && out.contains("seed=7"), "{out}");
    let (ok, out) = s(&[("DTA_TEST_SEED", "42")]);
    assert!(ok && out.contains("seed=42"), "{out}");
    let (ok, out) = s(&[("DTA_TEST_SEED", "0x10")]);
    assert!(ok && out.contains("seed=16"), "{out}");
    let (ok, _) = s(&[("DTA_TEST_SEED", "sevn")]);
    assert!(!ok, "a malformed seed must fail, not fall back");
}

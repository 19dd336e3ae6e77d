//! The README's "Running it for real" commands run as written, with only the ports and the
//! region directory adapted: the collector and the translator from the example configuration,
//! the reports, then every query answers (exit 0, `found`), the HTTP query too.

mod common;

use std::io::{Read, Write};

use common::{dta, Stack};

const README: &str = include_str!("../../../../README.md");

/// The command lines of the README's "Running it for real" block, comments stripped.
fn commands() -> Vec<Vec<String>> {
    let section = README
        .split("## Running it for real")
        .nth(1)
        .expect("README has a \"Running it for real\" section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```sh block");
    block
        .lines()
        .map(|l| l.split(" # ").next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// `GET http://{addr}{path}`: the status line and body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[test]
fn running_it_for_real_works_as_written() {
    let cmds = commands();
    assert!(cmds.len() >= 8, "{cmds:?}");
    // The collector and the translator: the Stack runs exactly these two from the example.
    let mut rest = vec![];
    let mut started = 0;
    for c in &cmds {
        match (c[0].as_str(), c.get(1).map(String::as_str)) {
            ("cargo", _) => {}
            ("target/release/dta", Some("collector" | "translator")) => {
                assert_eq!(c[2..], ["--config", "examples/dta.toml"], "{c:?}");
                started += 1;
            }
            _ => rest.push(c),
        }
    }
    assert_eq!(started, 2, "the README starts a collector and a translator");
    let mut s = Stack::start();
    let config = s.config.display().to_string();
    let mut stopped = false;
    for c in rest {
        if c[0] == "curl" {
            let url = c[1].trim_matches('\'');
            let path = url
                .strip_prefix("http://127.0.0.1:40080")
                .unwrap_or_else(|| panic!("{url}: not the example's collector"));
            let (status, body) = http_get(&s.http, path);
            assert!(status.contains("200"), "{url}: {status} {body}");
            assert!(body.contains("found"), "{url}: {body}");
            continue;
        }
        assert_eq!(c[0], "target/release/dta", "{c:?}");
        let mut args: Vec<String> = c[1..]
            .iter()
            .map(|a| {
                if a == "examples/dta.toml" {
                    config.clone()
                } else {
                    a.clone()
                }
            })
            .collect();
        if args[0] == "report" {
            args.extend([
                "--to".into(),
                s.listen.clone(),
                "--nack-port".into(),
                s.nack_port.to_string(),
                "-q".into(),
            ]);
        } else if !stopped {
            // Queries follow the reports: the translator has written them all (its Append
            // and Postcarding timers included) once it stops.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let stats = s.stop_translator();
            let rejected: u64 = stats["rejected"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(rejected, 0, "{}", stats["rejected"]);
            stopped = true;
        }
        let out = dta().args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "dta {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args[0] == "query" {
            assert!(!text.contains("empty"), "dta {args:?}: {text}");
        }
    }
    assert!(stopped, "the README queries what it reported");
}

/// The README's first command installs only what the demo needs: `scripts/demo.sh` runs the
/// demo profile of `scripts/setup.sh`, which needs a C toolchain and no browser, JDK, ns-3 or
/// clang; the second command's profile needs those.
#[test]
fn the_first_command_installs_only_what_the_demo_needs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let demo = std::fs::read_to_string(root.join("scripts/demo.sh")).unwrap();
    assert!(demo.contains("scripts/setup.sh --demo"), "{demo}");
    let print = |args: &[&str]| {
        let out = std::process::Command::new("bash")
            .arg(root.join("scripts/setup.sh"))
            .args(args)
            .arg("--print")
            .output()
            .unwrap();
        common::assert_success(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let first = print(&["--demo"]);
    let packages: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(
        packages,
        ["build-essential", "make", "pkg-config"],
        "{first}"
    );
    let all = print(&[]);
    for p in ["chromium", "openjdk-17-jre-headless", "libns3-dev", "clang"] {
        assert!(all.split_whitespace().any(|x| x == p), "{p}: {all}");
    }
    assert!(README.contains("scripts/demo.sh\n") && README.contains("scripts/test.sh\n"));
}

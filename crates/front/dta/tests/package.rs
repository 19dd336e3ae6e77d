//! `scripts/package.sh` packages the binary under test (no release build: seconds); the .deb is
//! checked with `dpkg-deb --info/--contents` and unpacked with `dpkg -x` into a throwaway root,
//! where the binary, the systemd units (`systemd-analyze verify`), the man pages, the shell
//! completions, the conffiles and the copyright file must be where Debian expects them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod common;
use common::assert_success;

const UNITS: [&str; 4] = [
    "dta-collector.service",
    "dta-translator.service",
    "dta-translator-xdp@.service",
    "dta-int-sink.service",
];

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The .deb and its unpacked root, built once for the tests of this file.
struct Built {
    deb: PathBuf,
    root: PathBuf,
}

fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !have("dpkg-deb") || !have("dpkg") {
                return None;
            }
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package-test");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
            let out = Command::new(repo.join("scripts/package.sh"))
                .args(["--no-wheels", "--bin", env!("CARGO_BIN_EXE_dta"), "--out"])
                .arg(dir.join("out"))
                .output()
                .unwrap();
            assert_success(&out);
            let stdout = String::from_utf8(out.stdout).unwrap();
            let deb = PathBuf::from(stdout.lines().last().expect("package.sh prints the .deb"));
            let root = dir.join("root");
            let x = Command::new("dpkg")
                .arg("-x")
                .arg(&deb)
                .arg(&root)
                .output()
                .unwrap();
            assert_success(&x);
            Some(Built { deb, root })
        })
        .as_ref()
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_deb_holds_what_debian_expects_where_it_expects_it() {
    let Some(b) = built() else {
        dta_testkit::skip!("dpkg-deb / dpkg missing: not a Debian machine");
    };
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        b.deb
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("dta_{version}_")),
        "{}",
        b.deb.display()
    );
    let info = dpkg_deb(&["--info"], &b.deb);
    for want in [
        "Package: dta".to_string(),
        format!("Version: {version}"),
        "Section: net".into(),
        "libc6".into(),
        "passwd".into(),
    ] {
        assert!(
            info.contains(&want),
            "no {want:?} in dpkg-deb --info:\n{info}"
        );
    }
    let contents = dpkg_deb(&["--contents"], &b.deb);
    let mut want: Vec<String> = vec![
        "./usr/bin/dta".into(),
        "./etc/dta/dta.toml".into(),
        "./etc/dta/int-sink.toml".into(),
        "./usr/share/doc/dta/copyright".into(),
        "./usr/share/man/man1/dta.1.gz".into(),
        "./usr/share/man/man1/dta-collector.1.gz".into(),
        "./usr/share/bash-completion/completions/dta".into(),
        "./usr/share/zsh/vendor-completions/_dta".into(),
        "./usr/share/fish/vendor_completions.d/dta.fish".into(),
        "./usr/share/dta/schemas/dta.proto".into(),
        "./usr/share/dta/schemas/json/flow-record.schema.json".into(),
        "./usr/share/dta/schemas/clickhouse/tables.sql".into(),
        "./usr/share/dta/schemas/openapi/collector.json".into(),
        "./usr/share/dta/schemas/examples/consume.py".into(),
    ];
    want.extend(UNITS.iter().map(|u| format!("./lib/systemd/system/{u}")));
    for w in &want {
        assert!(
            contents.lines().any(|l| l.ends_with(w.as_str())),
            "{w} not in the package:\n{contents}"
        );
    }
    // Every file root's, whoever built it.
    for l in contents.lines() {
        assert!(l.contains(" root/root "), "not owned by root: {l}");
    }

    // The control archive: conffiles and maintainer scripts.
    let ctrl = b.root.parent().unwrap().join("control");
    let e = Command::new("dpkg-deb")
        .arg("-e")
        .arg(&b.deb)
        .arg(&ctrl)
        .output()
        .unwrap();
    assert_success(&e);
    let conffiles = std::fs::read_to_string(ctrl.join("conffiles")).unwrap();
    assert_eq!(
        conffiles.lines().collect::<Vec<_>>(),
        ["/etc/dta/dta.toml", "/etc/dta/int-sink.toml"]
    );
    let postinst = std::fs::read_to_string(ctrl.join("postinst")).unwrap();
    assert!(postinst.contains("useradd --system"), "{postinst}");
    for s in ["postinst", "prerm", "postrm"] {
        let n = Command::new("sh")
            .arg("-n")
            .arg(ctrl.join(s))
            .output()
            .unwrap();
        assert_success(&n);
    }
}

#[test]
fn the_unpacked_binary_man_pages_completions_and_conffiles_work() {
    let Some(b) = built() else {
        dta_testkit::skip!("dpkg-deb / dpkg missing: not a Debian machine");
    };
    let bin = b.root.join("usr/bin/dta");
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert_success(&v);
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("dta {}", env!("CARGO_PKG_VERSION"))
    );

    // A man page per command, gzipped roff naming the command and its options.
    let man = b.root.join("usr/share/man/man1");
    for (page, title, option) in [
        ("dta.1.gz", ".TH dta 1", "collector"),
        ("dta-collector.1.gz", ".TH dta-collector 1", "\\-\\-config"),
        (
            "dta-translator.1.gz",
            ".TH dta-translator 1",
            "\\-\\-metrics",
        ),
        ("dta-int-sink.1.gz", ".TH dta-int-sink 1", "\\-\\-config"),
        ("dta-check.1.gz", ".TH dta-check 1", "\\-\\-cluster"),
    ] {
        let out = Command::new("gzip")
            .arg("-dc")
            .arg(man.join(page))
            .output()
            .unwrap();
        assert_success(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(title), "{page}: no {title:?}");
        assert!(text.contains(option), "{page}: no {option:?}");
    }
    assert!(
        !man.join("dta-generate.1.gz").exists(),
        "the hidden packaging command has no page"
    );

    // Completions for the three shells, knowing the subcommands.
    let share = b.root.join("usr/share");
    for (file, marker) in [
        ("bash-completion/completions/dta", "complete -F _dta"),
        ("zsh/vendor-completions/_dta", "#compdef dta"),
        ("fish/vendor_completions.d/dta.fish", "complete -c dta"),
    ] {
        let text = std::fs::read_to_string(share.join(file)).unwrap();
        assert!(text.contains(marker), "{file}: no {marker:?}");
        assert!(text.contains("int-sink"), "{file} does not know `int-sink`");
    }
    let bash = Command::new("bash")
        .arg("-n")
        .arg(share.join("bash-completion/completions/dta"))
        .output()
        .unwrap();
    assert_success(&bash);

    // The conffiles: regions in /var/lib/dta, and valid as the services load them.
    let conf = b.root.join("etc/dta/dta.toml");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("\nregion_dir = \"/var/lib/dta\"\n"), "{text}");
    let check = Command::new(&bin)
        .args(["check", "--json", "--config"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_success(&check);
    let plan: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(plan["region_dir"], "/var/lib/dta");
    let int = std::fs::read_to_string(b.root.join("etc/dta/int-sink.toml")).unwrap();
    assert!(
        int.contains("\nregion_dir = \"/var/lib/dta/int\"\n"),
        "{int}"
    );

    let copyright = std::fs::read_to_string(share.join("doc/dta/copyright")).unwrap();
    assert!(copyright
        .starts_with("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"));
    assert!(copyright.contains("License: Apache-2.0"));
    assert!(copyright.contains(" Apache License") && copyright.contains("Version 2.0"));
}

#[test]
fn the_units_run_as_dta_with_only_their_capabilities_and_verify() {
    let Some(b) = built() else {
        dta_testkit::skip!("dpkg-deb / dpkg missing: not a Debian machine");
    };
    let dir = b.root.join("lib/systemd/system");
    for u in UNITS {
        let text = std::fs::read_to_string(dir.join(u)).unwrap();
        for line in [
            "User=dta",
            "Restart=on-failure",
            "KillSignal=SIGTERM",
            "ProtectSystem=strict",
            "ReadWritePaths=/var/lib/dta",
            "NoNewPrivileges=yes",
            "ExecStart=/usr/bin/dta ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(line)),
                "{u}: no {line:?}"
            );
        }
        let caps: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("AmbientCapabilities="))
            .collect();
        let bounding: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("CapabilityBoundingSet="))
            .collect();
        let want = if u.starts_with("dta-translator-xdp") {
            "CAP_BPF CAP_PERFMON CAP_NET_ADMIN"
        } else {
            ""
        };
        assert_eq!(caps, [want], "{u}: ambient capabilities");
        assert_eq!(bounding, [want], "{u}: capability bounding set");
    }

    if !have("systemd-analyze") {
        dta_testkit::skip!("systemd-analyze missing: the units are not verified");
    }
    // Verified as installed: copies whose ExecStart runs the unpacked binary, their
    // `Documentation=man:` pages looked up in the unpacked man pages. The template through an
    // instance.
    let tmp = b.root.parent().unwrap().join("units");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let bin = b.root.join("usr/bin/dta");
    let mut files = vec![];
    for u in UNITS {
        let text = std::fs::read_to_string(dir.join(u)).unwrap();
        let f = tmp.join(u.replace("@.service", "@lo.service"));
        std::fs::write(&f, text.replace("/usr/bin/dta", &bin.display().to_string())).unwrap();
        files.push(f);
    }
    let analyze = |args: &[&str]| {
        Command::new("systemd-analyze")
            .args(args)
            .args(&files)
            .env("MANPATH", b.root.join("usr/share/man"))
            .env("SYSTEMD_LOG_COLOR", "0")
            .output()
            .unwrap()
    };
    let out = analyze(&["verify"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The sandbox: every unit's exposure 2.0 or less ("OK" on systemd's 0..10 scale).
    let out = analyze(&["security", "--offline=yes", "--threshold=20", "--no-pager"]);
    assert!(
        out.status.success(),
        "systemd-analyze security:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ELF section names of `file`, read from its section header table.
fn elf_sections(file: &Path) -> Vec<String> {
    let b = std::fs::read(file).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not ELF", file.display());
    assert_eq!(b[4], 2, "64-bit ELF");
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let strtab = u64_at(shoff + shstrndx * shentsize + 0x18);
    (0..shnum)
        .map(|i| {
            let name = u32::from_le_bytes(
                b[shoff + i * shentsize..shoff + i * shentsize + 4]
                    .try_into()
                    .unwrap(),
            ) as usize;
            let s = &b[strtab + name..];
            String::from_utf8_lossy(&s[..s.iter().position(|&c| c == 0).unwrap()]).into_owned()
        })
        .collect()
}

#[test]
fn the_packaged_binary_is_stripped_and_its_debug_information_kept_beside_it() {
    let Some(b) = built() else {
        dta_testkit::skip!("dpkg-deb / dpkg missing: not a Debian machine");
    };
    let shipped = elf_sections(&b.root.join("usr/bin/dta"));
    assert!(
        // .debug_gdb_scripts is loaded with the program (gdb's pretty-printers), not debug data.
        !shipped
            .iter()
            .any(|s| s.starts_with(".debug_") && s != ".debug_gdb_scripts"),
        "the packaged binary keeps debug sections: {shipped:?}"
    );
    assert!(shipped.iter().any(|s| s == ".gnu_debuglink"), "{shipped:?}");
    let debug = b.deb.with_extension("debug");
    let kept = elf_sections(&debug);
    assert!(
        kept.iter().any(|s| s == ".debug_line"),
        "{} holds no line tables: {kept:?}",
        debug.display()
    );
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&b.root.join("usr/bin/dta")) < size(Path::new(env!("CARGO_BIN_EXE_dta"))),
        "stripping made the binary no smaller"
    );
}

/// The packaged configuration, run as the services run it (ports and directories moved to a
/// temporary place): the INT sink writes its stores, the collector serves them read-only beside
/// its own, finds them by layout for the network map, and its console reaches the translator's
/// and the INT sink's metrics; the package raises the receive buffer the services ask for.
#[test]
fn the_packaged_configuration_shows_int_data_and_every_peer() {
    let Some(b) = built() else {
        dta_testkit::skip!("dpkg-deb / dpkg missing: not a Debian machine");
    };
    let sysctl = std::fs::read_to_string(b.root.join("usr/lib/sysctl.d/60-dta.conf")).unwrap();
    assert!(sysctl.contains("net.core.rmem_max = 67108864"), "{sysctl}");
    let postinst = Command::new("dpkg-deb")
        .arg("--info")
        .arg(&b.deb)
        .arg("postinst")
        .output()
        .unwrap();
    let postinst = String::from_utf8_lossy(&postinst.stdout);
    assert!(postinst.contains("60-dta.conf"), "{postinst}");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (http, int_udp) = (common::free_tcp_port(), common::free_udp_port());
    let (tm, im) = (common::free_tcp_port(), common::free_tcp_port());
    let main = std::fs::read_to_string(b.root.join("etc/dta/dta.toml"))
        .unwrap()
        .replace(
            "\"/var/lib/dta/int\"",
            &format!("{:?}", d.join("int").display().to_string()),
        )
        .replace(
            "\"/var/lib/dta\"",
            &format!("{:?}", d.join("main").display().to_string()),
        )
        .replace("127.0.0.1:40080", &format!("127.0.0.1:{http}"))
        .replace("127.0.0.1:9464", &format!("127.0.0.1:{tm}"))
        .replace("127.0.0.1:9465", &format!("127.0.0.1:{im}"));
    assert!(
        main.contains(&format!("translator_metrics = \"127.0.0.1:{tm}\"")),
        "{main}"
    );
    let int = std::fs::read_to_string(b.root.join("etc/dta/int-sink.toml"))
        .unwrap()
        .replace(
            "\"/var/lib/dta/int\"",
            &format!("{:?}", d.join("int").display().to_string()),
        )
        .replace("127.0.0.1:32766", &format!("127.0.0.1:{int_udp}"));
    std::fs::write(d.join("dta.toml"), &main).unwrap();
    std::fs::write(d.join("int-sink.toml"), &int).unwrap();
    let bin = b.root.join("usr/bin/dta");
    // As the units start them: the INT sink, then the collector (After=dta-int-sink.service).
    let mut sink = common::spawn(
        Command::new(&bin)
            .args([
                "int-sink",
                "--metrics",
                &format!("127.0.0.1:{im}"),
                "--config",
            ])
            .arg(d.join("int-sink.toml")),
    );
    common::wait_for("the INT sink's metrics", || common::scrape(im).is_some());
    let mut collector = common::spawn(
        Command::new(&bin)
            .args(["collector", "--config"])
            .arg(d.join("dta.toml")),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{http}").parse().unwrap();
    let get = |p: &str| {
        dta_http::client::get(addr, p, None, std::time::Duration::from_secs(5)).map(|a| {
            (
                a.status,
                serde_json::from_slice::<serde_json::Value>(&a.body).ok(),
            )
        })
    };
    common::wait_for("the collector's API", || get("/stores").is_ok());
    let (_, stores) = get("/stores").unwrap();
    let names: Vec<String> = stores
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["header"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    for n in [
        "kw",
        "paths",
        "int_paths",
        "int_events",
        "int_hist",
        "int_latency",
    ] {
        assert!(names.iter().any(|x| x == n), "{n}: {names:?}");
    }
    let (status, net) = get("/int/network").unwrap();
    assert_eq!(status, 200, "{net:?}");
    let (_, peers) = get("/console/peers").unwrap();
    let peers = peers.unwrap();
    let peer = |name: &str| {
        peers["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no peer {name}: {peers}"))
    };
    assert_eq!(peer("int-sink")["reachable"], true, "{peers}");
    assert_eq!(peer("translator")["configured"], true, "{peers}");
    for c in [&mut collector, &mut sink] {
        common::interrupt(c, libc::SIGTERM);
        assert!(c.wait().unwrap().success());
    }
}

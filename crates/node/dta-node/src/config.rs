//! The configuration files: `dta.toml` (the collector, the translator and the stores) and the
//! INT sink's file ([`IntSinkFile`]). Every relative path in either is taken relative to the
//! file's directory ([`Config::resolve_paths`], [`IntSinkFile::load`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use dta_collector::{CollectorConfig, StoreConfig};
use dta_translator::TranslatorConfig;

/// The configuration `dta demo` runs when given none.
pub const EMBEDDED: &str = include_str!("../../../../examples/dta.toml");

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_region_dir")]
    pub region_dir: PathBuf,
    #[serde(default)]
    pub collector: CollectorConfig,
    #[serde(default)]
    pub translator: TranslatorConfig,
    #[serde(default)]
    pub store: Vec<StoreConfig>,
}

fn default_region_dir() -> PathBuf {
    PathBuf::from("dta-regions")
}

/// Largest configuration file read (bytes): a path naming something endless (`/dev/zero`) or
/// huge is refused before it is read whole.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The text of configuration file `path`, at most [`MAX_CONFIG_BYTES`].
pub fn read_config(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .with_context(|| format!("reading configuration {}", path.display()))?;
    let mut text = String::new();
    f.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading configuration {}", path.display()))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        anyhow::bail!(
            "configuration {} is larger than {MAX_CONFIG_BYTES} bytes",
            path.display()
        );
    }
    Ok(text)
}

/// A configuration error as one message whose long lines (a value, the parser's excerpt of the
/// offending line) are cut in the middle ([`dta_log::elide`]): never 200 KB echoed back.
fn bounded(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::msg(dta_log::elide(&format!("{e:#}")))
}

impl Config {
    /// Parse and check a configuration's text (every setting, the stores' specs, the rules).
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse_unbounded(text).map_err(bounded)
    }

    fn parse_unbounded(text: &str) -> anyhow::Result<Config> {
        let cfg: Config = toml::from_str(text)?;
        let specs = cfg
            .store
            .iter()
            .map(|s| s.spec().map(|spec| (s.name.as_str(), spec)))
            .collect::<Result<Vec<_>, _>>()?;
        cfg.translator.validate().map_err(anyhow::Error::msg)?;
        cfg.compile_rules(&specs, 0)?;
        let cat: Vec<_> = specs.iter().map(|(n, s)| (*n, s)).collect();
        let unreachable = dta_translator::unreachable_stores(&cat, &cfg.translator.rules);
        if !unreachable.is_empty() {
            anyhow::bail!("{}", unreachable.join("; "));
        }
        Ok(cfg)
    }

    /// [`Config::compile_rules`] against the stores as their region headers describe them (the
    /// truth for a store's parameters): what a translator serving those regions runs.
    pub fn compile_rules_for<'a>(
        &self,
        headers: impl IntoIterator<Item = &'a dta_store::Header>,
        generation: u64,
    ) -> anyhow::Result<dta_translator::rules::RuleSet> {
        compile_rules(&self.translator, headers, generation)
    }

    /// The translator rules compiled against this configuration's stores (`specs`, in
    /// `store` order), as generation `generation`; the error names the rule and the setting.
    pub fn compile_rules(
        &self,
        specs: &[(&str, dta_store::StoreSpec)],
        generation: u64,
    ) -> anyhow::Result<dta_translator::rules::RuleSet> {
        let cat: Vec<_> = specs.iter().map(|(n, s)| (*n, s)).collect();
        dta_translator::rules::RuleSet::compile(&self.translator.rules, &cat, generation)
            .map_err(anyhow::Error::msg)
    }

    /// Load `path`. Every relative path of the file is taken relative to the file's directory
    /// ([`Config::resolve_paths`]), not to the working directory of whoever runs it.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = read_config(path)?;
        let mut cfg =
            Config::parse(&text).with_context(|| format!("in configuration {}", path.display()))?;
        cfg.resolve_paths(config_dir(path));
        Ok(cfg)
    }

    /// Make every relative path of the configuration relative to `base`: `region_dir`,
    /// `[collector] token_file` and `serve_read_only`, `[translator.flow_control] spill_file`. The one list of the
    /// file's paths: a new path setting is added here.
    pub fn resolve_paths(&mut self, base: &Path) {
        resolve(base, &mut self.region_dir);
        if let Some(f) = self.collector.token_file.as_mut() {
            resolve(base, f);
        }
        for d in &mut self.collector.serve_read_only {
            resolve(base, d);
        }
        resolve_translator_paths(base, &mut self.translator);
    }
    pub fn embedded() -> Config {
        Config::parse(EMBEDDED).expect("the embedded configuration is valid")
    }
}

/// The directory relative paths of the configuration file `path` are taken from (`.` for a
/// bare file name).
pub fn config_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// `p` relative to `base` when it is relative.
pub fn resolve(base: &Path, p: &mut PathBuf) {
    if p.is_relative() {
        *p = base.join(&*p);
    }
}

/// The paths of a `[translator]` table (in `dta.toml` and in the INT sink's file) relative to
/// `base`: `flow_control.spill_file`, `control_key_file`.
/// The rules of translator `t` compiled against the stores as their region headers describe
/// them (the truth for a store's parameters), as generation `generation`; the error names the
/// rule and the setting.
pub fn compile_rules<'a>(
    t: &TranslatorConfig,
    headers: impl IntoIterator<Item = &'a dta_store::Header>,
    generation: u64,
) -> anyhow::Result<dta_translator::rules::RuleSet> {
    let specs: Vec<(&str, dta_store::StoreSpec)> = headers
        .into_iter()
        .map(|h| (h.name.as_str(), h.spec.clone()))
        .collect();
    let cat: Vec<_> = specs.iter().map(|(n, s)| (*n, s)).collect();
    dta_translator::rules::RuleSet::compile(&t.rules, &cat, generation).map_err(anyhow::Error::msg)
}

pub fn resolve_translator_paths(base: &Path, t: &mut dta_translator::TranslatorConfig) {
    if let Some(f) = t.flow_control.spill_file.as_mut() {
        resolve(base, f);
    }
    if let Some(f) = t.control_key_file.as_mut() {
        resolve(base, f);
    }
}

/// A secret file a service of a configuration reads, and why its mode is worth fixing.
#[derive(Debug, Clone, Serialize)]
pub struct SecretFile {
    /// `token file`, `control key file`.
    pub what: &'static str,
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Config {
    /// Every secret file the services of this configuration read, each with its mode warning:
    /// the control key read and checked as the translator reads it (an error names the file);
    /// the token file is read where the HTTP options are built (`dta_collector::http::options`),
    /// so that its warning is said once.
    pub fn secret_files(&self) -> anyhow::Result<Vec<SecretFile>> {
        let mut out = vec![];
        if let Some(p) = &self.collector.token_file {
            out.push(SecretFile {
                what: "token file",
                path: p.clone(),
                warning: dta_http::secret::mode_warning(p, "token file"),
            });
        }
        if let Some(p) = &self.translator.control_key_file {
            read_control_key(p).context("[translator]")?;
            out.push(SecretFile {
                what: "control key file",
                path: p.clone(),
                warning: dta_http::secret::mode_warning(p, "control key file"),
            });
        }
        Ok(out)
    }
}

/// The control key in `path` (32 hexadecimal digits, not all zero; docs/security.md), read by
/// the one secret reader ([`dta_http::secret`]). The error names the file, never its content.
pub fn read_control_key(path: &Path) -> anyhow::Result<dta_wire::auth::ControlKey> {
    let s = dta_http::secret::read(path, "control key file")?;
    dta_wire::auth::ControlKey::from_hex(&s.text)
        .map_err(|e| anyhow::anyhow!("control key file {}: {e}", path.display()))
}

/// The INT sink's configuration file (`dta int-sink --config`, docs/int-sink.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntSinkFile {
    pub region_dir: PathBuf,
    /// Where telemetry reports arrive.
    #[serde(default = "default_int_listen")]
    pub listen: std::net::SocketAddr,
    #[serde(default)]
    pub sink: dta_int::IntSinkConfig,
    /// The sink's own translator (its Postcarding cache, Append batches, timers); the settings
    /// of a translator that receives reports itself are refused by [`crate::modes`].
    #[serde(default)]
    pub translator: TranslatorConfig,
    /// Stores to create (or reopen) in `region_dir`; empty: use the regions already there.
    #[serde(default)]
    pub store: Vec<StoreConfig>,
}

/// Loopback: reports from elsewhere need an explicit `listen` (and an allow-list).
fn default_int_listen() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 32766))
}

impl IntSinkFile {
    /// Parse an INT sink file and check every setting ([`dta_int::IntSinkConfig::validate`],
    /// [`TranslatorConfig::validate`]).
    pub fn parse(text: &str) -> anyhow::Result<IntSinkFile> {
        IntSinkFile::parse_unbounded(text).map_err(bounded)
    }

    fn parse_unbounded(text: &str) -> anyhow::Result<IntSinkFile> {
        let f: IntSinkFile = toml::from_str(text)?;
        f.translator.validate().map_err(anyhow::Error::msg)?;
        f.sink
            .validate()
            .map_err(|e| anyhow::anyhow!("[sink] {e}"))?;
        for s in &f.store {
            s.spec()?;
        }
        Ok(f)
    }

    /// Read and parse `path`; every relative path of the file (`region_dir`, the
    /// `[translator]` spill file) is taken relative to the file's directory, as in `dta.toml`.
    pub fn load(path: &Path) -> anyhow::Result<IntSinkFile> {
        let text = read_config(path)?;
        let mut f = IntSinkFile::parse(&text)
            .with_context(|| format!("in configuration {}", path.display()))?;
        let base = config_dir(path);
        resolve(base, &mut f.region_dir);
        resolve_translator_paths(base, &mut f.translator);
        Ok(f)
    }
}

/// A configuration file of any service: a node's (`dta.toml`: the collector and the translator)
/// or an INT sink's (a top-level `listen` or a `[sink]` table says which). What `dta check` and
/// the queries take, so that every example configuration is understood by every tool.
#[derive(Debug, Clone)]
pub enum ServiceFile {
    Node(Box<Config>),
    IntSink(Box<IntSinkFile>),
}

impl ServiceFile {
    /// Read `path` and load it as the configuration of the service it is for.
    pub fn load(path: &Path) -> anyhow::Result<ServiceFile> {
        let text = read_config(path)?;
        // Only the top-level keys decide; a file that does not parse as TOML is the node's
        // parser's to explain.
        let int_sink = toml::from_str::<toml::Table>(&text)
            .is_ok_and(|t| t.contains_key("sink") || t.contains_key("listen"));
        Ok(if int_sink {
            ServiceFile::IntSink(Box::new(IntSinkFile::load(path)?))
        } else {
            ServiceFile::Node(Box::new(Config::load(path)?))
        })
    }

    /// Where the service's regions are.
    pub fn region_dir(&self) -> &Path {
        match self {
            ServiceFile::Node(c) => &c.region_dir,
            ServiceFile::IntSink(f) => &f.region_dir,
        }
    }

    /// The stores the file configures (an INT sink's may be empty: it then uses the regions
    /// already in its directory).
    pub fn stores(&self) -> &[StoreConfig] {
        match self {
            ServiceFile::Node(c) => &c.store,
            ServiceFile::IntSink(f) => &f.store,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile values are refused with a message of bounded size that still names the setting.
    #[test]
    fn errors_never_echo_huge_values() {
        let huge = "x".repeat(200_000);
        for (text, names) in [
            (format!("[translator]\nlisten = \"{huge}\"\n"), "listen"),
            (format!("[[store]]\nname = \"{huge}\"\nkind = \"key-write\"\n"), "name"),
            (format!("[[store]]\nname = \"kw\"\nkind = \"{huge}\"\n"), "kind"),
            (format!("{huge} = 1\n"), "x"),
            (
                format!(
                    "[[store]]\nname = \"kw\"\nkind = \"key-write\"\n[[translator.rules]]\n\
                     name = \"r\"\nprimitive = \"key-write\"\naction = \"drop\"\nwhere = \"{huge}\"\n"
                ),
                "where",
            ),
        ] {
            let e = format!("{:#}", Config::parse(&text).unwrap_err());
            assert!(e.len() < 4096, "{} bytes: {}", e.len(), &e[..300]);
            assert!(e.contains(names), "{e}");
            if let Err(e) = IntSinkFile::parse(&text) {
                assert!(format!("{e:#}").len() < 4096, "the INT sink's file");
            }
        }
    }

    #[test]
    fn an_endless_configuration_file_is_refused_unread() {
        let e = read_config(Path::new("/dev/zero")).unwrap_err();
        assert!(
            format!("{e:#}").contains("larger than 16777216 bytes"),
            "{e:#}"
        );
    }

    #[test]
    fn embedded_config_has_every_primitive() {
        let cfg = Config::embedded();
        let kinds: Vec<_> = cfg.store.iter().map(|s| s.kind.unwrap()).collect();
        use dta_collector::config::StoreKindName::*;
        for k in [KeyWrite, KeyIncrement, Postcarding, Append, SketchMerge] {
            assert!(kinds.contains(&k), "{k:?} missing");
        }
    }

    #[test]
    fn unknown_keys_and_misplaced_parameters_are_errors() {
        let e = Config::parse("regoin_dir = 'x'").unwrap_err();
        assert!(e.to_string().contains("regoin_dir"), "{e}");
        let e = Config::parse("[[store]]\nname='a'\nkind='append'\nslots=8\n").unwrap_err();
        assert!(format!("{e:#}").contains("`slots` does not apply"), "{e:#}");
        let e = Config::parse("[translator.flow_control]\nlow_threshold = 0.1\n").unwrap_err();
        assert!(e.to_string().contains("below medium_threshold"), "{e}");
        let e = Config::parse("[translator.flow_control]\nbudget = 1\n").unwrap_err();
        assert!(e.to_string().contains("budget"), "{e}");
    }

    #[test]
    fn flow_control_settings_reach_the_translator() {
        let cfg = Config::parse(
            "[translator.flow_control]\nwrite_budget = 500000\nburst = 4096\n\
             spill_file = '/var/tmp/dta-spill'\nredundancy_after_ms = 20\n",
        )
        .unwrap();
        let fc = &cfg.translator.flow_control;
        assert_eq!(
            (fc.write_budget, fc.burst, fc.redundancy_after_ms),
            (500_000, 4096, 20)
        );
        assert_eq!(
            fc.spill_file.as_deref(),
            Some(Path::new("/var/tmp/dta-spill"))
        );
        assert_eq!(fc.low_threshold, 0.5, "unset values keep their defaults");
    }

    #[test]
    fn every_relative_path_is_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("etc");
        std::fs::create_dir(&sub).unwrap();
        let f = sub.join("dta.toml");
        std::fs::write(
            &f,
            "region_dir = 'regions'\n[collector]\ntoken_file = 'http.token'\n\
             [translator.flow_control]\nspill_file = 'spill/dta'\n",
        )
        .unwrap();
        let cfg = Config::load(&f).unwrap();
        assert_eq!(cfg.region_dir, sub.join("regions"));
        assert_eq!(cfg.collector.token_file, Some(sub.join("http.token")));
        assert_eq!(
            cfg.translator.flow_control.spill_file,
            Some(sub.join("spill/dta"))
        );
        // Absolute paths are kept as they are.
        std::fs::write(
            &f,
            "region_dir = '/var/lib/dta'\n[collector]\ntoken_file = '/etc/dta/t'\n",
        )
        .unwrap();
        let cfg = Config::load(&f).unwrap();
        assert_eq!(cfg.region_dir, Path::new("/var/lib/dta"));
        assert_eq!(
            cfg.collector.token_file.as_deref(),
            Some(Path::new("/etc/dta/t"))
        );
        // A bare file name: relative to the working directory's `.`.
        assert_eq!(config_dir(Path::new("dta.toml")), Path::new("."));
    }
}

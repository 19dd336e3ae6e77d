//! `dta generate man|completions DIR`: the man pages and shell completions of the CLI, from its
//! clap definition (so they cannot drift from it). scripts/package.sh runs it at package build.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use clap_complete::Shell;

#[derive(Subcommand)]
pub enum Generate {
    /// One man page (section 1) per command: dta.1, dta-collector.1, dta-query-kw.1, ...
    Man {
        /// Directory to write the pages into (created if missing).
        dir: PathBuf,
    },
    /// Completion scripts for bash (dta.bash), zsh (_dta) and fish (dta.fish).
    Completions {
        /// Directory to write the scripts into (created if missing).
        dir: PathBuf,
    },
}

/// The shells completions are written for.
pub const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes one kind of file into a directory; how many it wrote.
type Writer = fn(clap::Command, &Path) -> anyhow::Result<usize>;

pub fn run(g: Generate, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let (dir, write, what): (PathBuf, Writer, &str) = match g {
        Generate::Man { dir } => (dir, man, "man pages"),
        Generate::Completions { dir } => (dir, completions, "completions"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let n = write(cmd, &dir)?;
    eprintln!("{n} {what} written to {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn man(cmd: clap::Command, dir: &Path) -> anyhow::Result<usize> {
    clap_mangen::generate_to(cmd, dir).with_context(|| format!("writing to {}", dir.display()))?;
    Ok(std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
        .count())
}

fn completions(mut cmd: clap::Command, dir: &Path) -> anyhow::Result<usize> {
    let name = cmd.get_name().to_owned();
    for sh in SHELLS {
        clap_complete::generate_to(sh, &mut cmd, &name, dir)
            .with_context(|| format!("writing the {sh} completions to {}", dir.display()))?;
    }
    Ok(SHELLS.len())
}

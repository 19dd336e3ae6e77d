//! `dta-faults`: checks for `scripts/faults.sh`.
//!
//! `dta-faults check-ki --region FILE --keys N --run SEED:COUNT...`: every key the runs sent
//! (`dta report --primitive ki --keys N --seed SEED --count COUNT`, one sender each) is read
//! from the Key-Increment region and compared with the sum of its counters; prints the
//! comparison as JSON, exit status 0 when every key is exact, 1 otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use dta_faults::check::{compare, expected_ki, Run};

#[derive(Parser)]
#[command(name = "dta-faults", about = "Checks for the fault-injection suite")]
struct Cli {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Compare a Key-Increment region with what `dta report --primitive ki` runs sent.
    CheckKi {
        /// The region file.
        #[arg(long)]
        region: PathBuf,
        /// `dta report --keys`.
        #[arg(long)]
        keys: u64,
        /// `dta report --key-len`.
        #[arg(long, default_value_t = 4)]
        key_len: u8,
        /// A run: `dta report --seed` and `--count`, as SEED:COUNT (repeatable).
        #[arg(long = "run", required = true)]
        runs: Vec<Run>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dta-faults: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.what {
        What::CheckKi {
            region,
            keys,
            key_len,
            runs,
        } => {
            let want = expected_ki(&runs, keys, key_len).map_err(anyhow::Error::msg)?;
            let r = dta_store::Region::open_read_only(&region)
                .with_context(|| format!("opening region {}", region.display()))?;
            let c = compare(&want, |k| {
                dta_collector::query::key_increment(&r, k, None).map(|a| a.count)
            })?;
            r.check()?;
            println!("{}", serde_json::to_string_pretty(&c)?);
            Ok(if c.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

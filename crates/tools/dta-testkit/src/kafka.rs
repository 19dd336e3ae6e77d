//! A single-node Apache Kafka broker in KRaft mode for tests: the jars `scripts/setup.sh`
//! resolves from Maven Central (`scripts/kafka/pom.xml`) run by the machine's Java 17. The
//! storage directory is formatted in a temporary directory, the broker listens on free loopback
//! ports, and it is stopped (and the directory removed) on drop. [`KafkaBroker::restart`] stops
//! it gracefully and starts it again on the same ports and data, as an operator's restart does.
//!
//! ```text
//! let broker = match dta_testkit::kafka::KafkaBroker::start() {
//!     Ok(b) => b,
//!     Err(why) => dta_testkit::skip!("{why}"),
//! };
//! ```

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the broker's jars are: `$DTA_KAFKA_LIBS`, else `~/.cache/dta/kafka/libs` (what
/// `scripts/setup.sh` fills).
pub const LIBS_ENV: &str = "DTA_KAFKA_LIBS";

/// How long a broker may take to start (a JVM on a loaded two-core machine is slow).
pub const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a graceful stop may take before the broker is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// The line the broker logs once it serves clients.
const STARTED: &str = "Kafka Server started";

/// The jar directory, whether or not it exists.
pub fn libs_dir() -> PathBuf {
    match std::env::var_os(LIBS_ENV) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/dta/kafka/libs"),
    }
}

/// Why a Kafka broker cannot run here (for [`crate::skip!`]), or `None` when it can.
pub fn unavailable() -> Option<String> {
    if !crate::have_tool("java", "-version") {
        return Some("needs Java 17 (`java`) to run the Kafka broker (scripts/setup.sh)".into());
    }
    let libs = libs_dir();
    let has_kafka = fs::read_dir(&libs).ok().is_some_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-"))
    });
    if !has_kafka {
        return Some(format!(
            "no Kafka jars in {} (scripts/setup.sh resolves them with Maven; {LIBS_ENV} overrides)",
            libs.display()
        ));
    }
    None
}

/// A running broker (or one between [`KafkaBroker::stop`] and [`KafkaBroker::start_again`]).
pub struct KafkaBroker {
    dir: tempfile::TempDir,
    port: u16,
    controller_port: u16,
    child: Option<Child>,
    /// Starts so far (1 after [`KafkaBroker::start`]).
    pub starts: u32,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral loopback port")
}

impl KafkaBroker {
    /// Format a KRaft storage directory and start the broker; `Err` (a reason for
    /// [`crate::skip!`]) only when Java or the jars are missing. Panics when the broker does not
    /// start: that is a failure, not a skip.
    pub fn start() -> Result<KafkaBroker, String> {
        if let Some(why) = unavailable() {
            return Err(why);
        }
        let dir = tempfile::Builder::new()
            .prefix("dta-kafka-")
            .tempdir()
            .expect("creating the broker's directory");
        let mut b = KafkaBroker {
            dir,
            port: free_port(),
            controller_port: free_port(),
            child: None,
            starts: 0,
        };
        b.write_config();
        let out = b
            .java()
            .args(["kafka.tools.StorageTool", "format", "--ignore-formatted"])
            .args(["-t", "ZHRhLXRlc3Qta2Fma2EtMQ"])
            .arg("-c")
            .arg(b.config())
            .output()
            .expect("running kafka.tools.StorageTool");
        assert!(
            out.status.success(),
            "formatting the Kafka storage failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        b.start_again();
        Ok(b)
    }

    /// `127.0.0.1:PORT`, the bootstrap address.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("server.properties")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }

    fn write_config(&self) {
        let d = self.dir.path();
        let (p, c) = (self.port, self.controller_port);
        let props = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{c}\n\
             listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{p}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             inter.broker.listener.name=PLAINTEXT\n\
             log.dirs={}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n",
            d.join("data").display()
        );
        fs::write(self.config(), props).expect("writing server.properties");
        fs::write(
            d.join("log4j.properties"),
            "log4j.rootLogger=INFO, stdout\n\
             log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n",
        )
        .expect("writing log4j.properties");
    }

    fn java(&self) -> Command {
        let mut c = Command::new("java");
        c.args(["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"])
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                self.dir.path().join("log4j.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", libs_dir().display()));
        c
    }

    /// Start the broker (again, after [`KafkaBroker::stop`]) and wait until it serves.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the broker is running");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .expect("opening broker.log");
        let from = log.metadata().map_or(0, |m| m.len()) as usize;
        let child = self
            .java()
            .arg("kafka.Kafka")
            .arg(self.config())
            .stdout(log.try_clone().expect("cloning the log handle"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawning the Kafka broker");
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = fs::read(self.log()).unwrap_or_default();
            if text.len() > from && String::from_utf8_lossy(&text[from..]).contains(STARTED) {
                return;
            }
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "the Kafka broker exited ({st}) while starting:\n{}",
                    self.tail()
                );
            }
            if Instant::now() > deadline {
                self.kill();
                panic!(
                    "the Kafka broker did not start in {START_TIMEOUT:?}:\n{}",
                    self.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stop gracefully (SIGTERM: the broker flushes its logs and closes), killing it after
    /// [`STOP_TIMEOUT`].
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stop, then start again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The last lines of the broker's log, for failure messages.
    pub fn tail(&self) -> String {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Typed values of experiment files: what the files write as text (`"10s"`,
//! `"1gbit"`, `"rotating"`) parsed once, while the file is read, into values
//! the runners use as they are. Each type implements `FromStr` and
//! `Deserialize` with a message that says what was expected, and serializes
//! back to the text it was read from, so a results directory's JSON copy of
//! an experiment reads as before. [`parse_toml`] is the one way a file becomes
//! a typed experiment: every error names the file, the field and the line.

use crate::ExperimentError;
use serde::de::DeserializeOwned;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Parses TOML text into `T`; `origin` names the text in errors. An error
/// reads `<file>: <field.path>: <message> (line N)`; a missing required field
/// is named with its full path.
pub fn parse_toml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, ExperimentError> {
    let de = toml::Deserializer::parse(text).map_err(|e| ExperimentError::Parse {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let mut message = inner.message().trim().to_string();
        let mut field = if path == "." { String::new() } else { path };
        if let Some(name) = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
        {
            field = if field.is_empty() {
                name.to_string()
            } else {
                format!("{field}.{name}")
            };
            message = "required, but missing".into();
        }
        if field.is_empty() {
            field = "(top level)".into();
        }
        if let Some(span) = inner.span() {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            message = format!("{message} (line {line})");
        }
        ExperimentError::Invalid {
            origin: origin.to_string(),
            field,
            message,
        }
    })
}

/// Implements `Deserialize` (from a string, through `FromStr`) and
/// `Serialize` (through `Display`) for a value type.
macro_rules! text_serde {
    ($t:ty, $what:literal) => {
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Visit;
                impl serde::de::Visitor<'_> for Visit {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$t, E> {
                        s.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(Visit)
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}

/// An enum of named values, its `FromStr` listing the names on error.
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident, $what:literal, { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }
        impl $name {
            /// Every value, in the order error messages list them.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The name as files write it.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!(
                        "{s:?}: expected {}, one of {}",
                        $what,
                        $name::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
                    ))
            }
        }
        text_serde!($name, $what);
    };
}

named_enum!(
    /// The wire format a server speaks (`server.protocol`).
    Protocol, "a protocol", {
        /// connlab's binary request format.
        Clb1 => "clb1",
        /// HTTP/1.1.
        Http => "http",
    }
);

named_enum!(
    /// When a client sends (`client.arrival`).
    Arrival, "an arrival process", {
        /// Evenly spaced sends (the locality paper).
        Fixed => "fixed",
        /// Exponential gaps.
        Poisson => "poisson",
    }
);

named_enum!(
    /// Which connections carry traffic (`client.active_policy`).
    ActivePolicy, "an active policy", {
        /// A seeded active set (the locality paper).
        Fixed => "fixed",
        /// Closed loop over random idle connections (the polling paper).
        Rotating => "rotating",
    }
);

named_enum!(
    /// The file-set model web backends serve (`web.model`).
    WebModel, "a file-set model", {
        /// The load-balancing paper's file set.
        Paper => "paper",
        /// SPECweb96's classes.
        Specweb96 => "specweb96",
        /// SURGE's distributions.
        Surge => "surge",
    }
);

named_enum!(
    /// How the gateway balances (`web.policy`).
    WebPolicy, "a balancing policy", {
        /// The paper's address modulo policy.
        IpMod => "ip-mod",
        /// A hash of the source address.
        SourceHash => "source-hash",
        /// Round robin.
        RoundRobin => "round-robin",
        /// The backend with the fewest connections.
        LeastConnections => "least-connections",
        /// Maglev consistent hashing.
        Maglev => "maglev",
    }
);

named_enum!(
    /// How a pipeline run schedules its layers (`pipeline.modes`).
    PipelineMode, "a pipeline mode", {
        /// One thread per layer per side (the paper's design).
        LayerParallel => "layer-parallel",
        /// One worker per side through every layer.
        RunToCompletion => "run-to-completion",
        /// Several workers per side through every layer, sharing each
        /// layer's state under its lock.
        RunToCompletionShared => "run-to-completion-shared",
    }
);

/// A span of time written with a unit (`"10s"`, `"500ms"`), kept with its
/// text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    text: String,
    value: Duration,
}

impl Span {
    /// A whole number of seconds, written `"<n>s"`.
    pub fn from_secs(n: u64) -> Span {
        Span {
            text: format!("{n}s"),
            value: Duration::from_secs(n),
        }
    }

    /// The duration.
    pub fn get(&self) -> Duration {
        self.value
    }

    /// Seconds, as a float.
    pub fn secs(&self) -> f64 {
        self.value.as_secs_f64()
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let value = connlab_measure::units::parse_duration(s)
            .map_err(|e| format!("{e} (a time with a unit, e.g. \"10s\" or \"500ms\")"))?;
        Ok(Span {
            text: s.to_string(),
            value,
        })
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

text_serde!(Span, "a time with a unit, e.g. \"10s\"");

/// A link rate as `tc` writes it (`"1gbit"`, `"100mbit"`), or `"none"` for
/// an unlimited link; kept with its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRate {
    text: String,
    bps: Option<u64>,
}

impl LinkRate {
    /// Bits per second; `None` when unlimited.
    pub fn bps(&self) -> Option<u64> {
        self.bps
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for LinkRate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(LinkRate {
            text: s.to_string(),
            bps: crate::parse_link_rate(s)?,
        })
    }
}

impl fmt::Display for LinkRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

text_serde!(LinkRate, "a link rate such as \"1gbit\", or \"none\"");

/// A set of CPUs (`"1"`, `"0,2-3"`), kept with its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet {
    text: String,
}

impl CpuSet {
    /// The list as written (what `--cpu` takes).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for CpuSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        connlab_os::CpuList::parse(s)
            .map_err(|e| format!("{e} (a CPU list such as \"1\" or \"0,2-3\")"))?;
        Ok(CpuSet {
            text: s.to_string(),
        })
    }
}

/// Reads as the list's text, as the field was before it was typed.
impl std::ops::Deref for CpuSet {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

text_serde!(CpuSet, "a CPU list such as \"1\" or \"0,2-3\"");

/// A share of one CPU (`"25%"`, `"0.25"`, `"100%"`), kept with its text.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuShare {
    text: String,
    share: f64,
}

impl CpuShare {
    /// A whole CPU, written `"100%"`.
    pub fn full() -> CpuShare {
        CpuShare {
            text: "100%".into(),
            share: 1.0,
        }
    }

    /// The share of one CPU.
    pub fn get(&self) -> f64 {
        self.share
    }

    /// The text as written (what `connlab cap --cpu` takes).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for CpuShare {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(CpuShare {
            text: s.to_string(),
            share: connlab_os::cgroup::parse_share(s)?,
        })
    }
}

impl fmt::Display for CpuShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

text_serde!(CpuShare, "a CPU share such as \"25%\"");

/// Deserializes a string that must parse as `T`, and keeps the string: for
/// fields other crates read as text (`server.protocol`, `server.engines`)
/// but that are checked as typed values when the file is read.
pub(crate) fn checked<'de, T, D>(d: D) -> Result<String, D::Error>
where
    T: FromStr<Err = String>,
    D: serde::Deserializer<'de>,
{
    let s = <String as serde::Deserialize>::deserialize(d)?;
    s.parse::<T>().map_err(serde::de::Error::custom)?;
    Ok(s)
}

/// What `server.engines` may name: a server engine (`epoll`) or, in a web
/// experiment, a gateway configuration (`nat`, `proxy:4`); which of the two
/// the kind allows is checked once the whole file is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineName(String);

impl EngineName {
    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for EngineName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.parse::<connlab_server::EngineKind>().is_ok() || crate::web_config(s).is_ok() {
            return Ok(EngineName(s.to_string()));
        }
        let engines: Vec<&str> = connlab_server::EngineKind::ALL
            .iter()
            .map(|e| e.name())
            .collect();
        Err(format!(
            "{s:?}: expected a server engine ({}) or, in a web experiment, a gateway configuration ({}, optionally with :N backends)",
            engines.join(", "),
            crate::WEB_CONFIGS.join(", ")
        ))
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

text_serde!(EngineName, "an engine name");

/// Deserializes a list of strings that must each parse as `T` (the error
/// names the item, `engines[2]`), and keeps them as text (see [`checked`]).
pub(crate) fn checked_list<'de, T, D>(d: D) -> Result<Vec<String>, D::Error>
where
    T: serde::Deserialize<'de> + fmt::Display,
    D: serde::Deserializer<'de>,
{
    let items = <Vec<T> as serde::Deserialize>::deserialize(d)?;
    Ok(items.iter().map(T::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Experiment;

    #[test]
    fn values_parse_and_print_as_written() {
        let s: Span = "1500ms".parse().unwrap();
        assert_eq!(s.get(), Duration::from_millis(1500));
        assert_eq!(s.to_string(), "1500ms");
        let r: LinkRate = "800mbit".parse().unwrap();
        assert_eq!(r.bps(), Some(800_000_000));
        assert_eq!("none".parse::<LinkRate>().unwrap().bps(), None);
        assert!("0,2-3".parse::<CpuSet>().is_ok());
        assert!((("25%".parse::<CpuShare>().unwrap()).get() - 0.25).abs() < 1e-9);
        assert_eq!(
            "round-robin".parse::<WebPolicy>(),
            Ok(WebPolicy::RoundRobin)
        );
        let e = "rotate".parse::<ActivePolicy>().unwrap_err();
        assert!(e.contains("fixed, rotating"), "{e}");
        assert!("ten".parse::<Span>().unwrap_err().contains("10s"));
        assert!("x".parse::<CpuSet>().is_err());
        assert_eq!(
            serde_json::to_string(&"layer-parallel".parse::<PipelineMode>().unwrap()).unwrap(),
            "\"layer-parallel\""
        );
    }

    const FILE: &str = r#"kind = "locality"
name = "t"
title = "T"
[topology]
client_hosts = 2
link_rate = "1gbit"
[server]
engines = ["select", "epoll"]
cpu = "1"
[client]
arrival = "fixed"
[matrix]
connections = [10]
active_ratios = [1]
rates = [100]
request_size = 128
response_size = 128
duration = "1s"
"#;

    fn error(from: &str, to: &str) -> String {
        assert!(FILE.contains(from), "{from}");
        Experiment::from_toml(&FILE.replace(from, to), "exp.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_bad_value_names_the_file_the_field_and_what_was_expected() {
        let e = Experiment::from_toml(FILE, "exp.toml").unwrap();
        assert_eq!(e.matrix.duration.get(), Duration::from_secs(1));
        assert_eq!(e.link_rate_bps(), Some(1_000_000_000));

        let err = error("[\"select\", \"epoll\"]", "[\"select\", \"epol\"]");
        assert!(err.starts_with("exp.toml: server.engines[1]: "), "{err}");
        assert!(err.contains("(line 8)"), "{err}");
        assert!(err.contains("\"epol\""), "{err}");
        assert!(err.contains("select, poll, epoll"), "{err}");

        let err = error("duration = \"1s\"", "duration = \"1 parsec\"");
        assert!(err.starts_with("exp.toml: matrix.duration: "), "{err}");
        assert!(err.contains("(line 18)"), "{err}");

        let err = error("arrival = \"fixed\"", "arrival = \"bursty\"");
        assert!(err.starts_with("exp.toml: client.arrival: "), "{err}");
        assert!(err.contains("fixed, poisson"), "{err}");

        let err = error("link_rate = \"1gbit\"", "link_rate = \"fast\"");
        assert!(err.starts_with("exp.toml: topology.link_rate: "), "{err}");

        let err = error("cpu = \"1\"", "cpu = \"one\"");
        assert!(err.starts_with("exp.toml: server.cpu: "), "{err}");
    }

    #[test]
    fn a_missing_field_is_named() {
        let err = error("duration = \"1s\"\n", "");
        assert!(err.starts_with("exp.toml: matrix.duration: "), "{err}");
        assert!(err.contains("missing"), "{err}");
        let err = error("name = \"t\"\n", "");
        assert!(err.starts_with("exp.toml: name: "), "{err}");
    }

    #[test]
    fn a_bad_pipeline_mode_names_the_field() {
        let text = "kind = \"pipeline\"\nname = \"p\"\ntitle = \"P\"\n[pipeline]\nlayers = [1]\nmessage_sizes = [1024]\nmessages = 10\nmodes = [\"rtc\"]\nlinks = [\"memory:unlimited\"]\n";
        let err = crate::PipelineExperiment::from_toml(text, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("p.toml: pipeline.modes[0]: "), "{err}");
        assert!(err.contains("layer-parallel, run-to-completion"), "{err}");
    }
}

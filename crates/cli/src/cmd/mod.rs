//! One module per subcommand: flags, then a typed config, then one library call.

pub(crate) mod cap;
pub(crate) mod child;
pub(crate) mod doctor;
pub(crate) mod gateway;
pub(crate) mod linkem;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod output;
pub(crate) mod pipeline;
pub(crate) mod report;
pub(crate) mod reproduce;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod singleip;
pub(crate) mod singleip_probe;
pub(crate) mod soak;
pub(crate) mod sweep;
pub(crate) mod webset;

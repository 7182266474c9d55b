//! One module per subcommand: flags, then a typed config, then one library call.

pub(crate) mod serve;

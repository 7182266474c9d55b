//! Child processes of the orchestrating commands: the lab's helpers
//! (`connlab_lab::run::child`), shared with the runners that still live here.

pub(crate) use connlab_lab::run::child::{server_cpu_s, ServerChild};

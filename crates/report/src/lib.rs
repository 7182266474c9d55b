//! Tables and plots from `connlab sweep` result directories (work in progress).

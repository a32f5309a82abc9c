//! The experiments (`src/reproduce/`), run as the CLI runs them.

mod experiments;

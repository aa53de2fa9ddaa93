//! Results. (Scaffolding.)

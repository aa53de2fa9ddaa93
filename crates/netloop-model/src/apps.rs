//! Traffic applications. (Scaffolding.)

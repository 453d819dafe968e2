//! Registry manifest checker (being written).

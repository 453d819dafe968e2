//! Helpers for the black-box end-to-end tests in `tests/tests/`: they spawn the real binaries.

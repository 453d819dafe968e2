//! Domain model of imagegate (being written).

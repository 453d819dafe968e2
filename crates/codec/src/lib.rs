//! Wire codec of imagegate (being written).

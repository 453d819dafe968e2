//! What a request holds while its answer is on the way: the account lease and the key permit.

use imagegate_dispatch::{KeyPermit, Lease};

/// Dropped when the answer is complete or the client went away, freeing both slots.
#[derive(Debug)]
#[expect(dead_code, reason = "the fields are held only for what their Drop does")]
pub struct Held {
    pub lease: Lease,
    pub permit: Option<KeyPermit>,
}

//! `POST /responses`: the client's JSON body forwarded as it is (its `model`, `tools`, `input` and
//! `stream` included; the caller has validated it and decided the stream flag from it).

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::failure::Failure;

/// The JSON body of a Responses call.
pub(crate) fn responses_body(body: &Map<String, Value>) -> Result<Bytes, Failure> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))
}

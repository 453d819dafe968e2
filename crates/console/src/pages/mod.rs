//! Page handlers, one module per page family.

pub(crate) mod account_form;
pub(crate) mod admin_accounts;
pub(crate) mod admin_groups;
pub(crate) mod admin_usage;
pub(crate) mod admin_users;
pub(crate) mod keys;
pub(crate) mod login;
pub(crate) mod usage;
pub(crate) mod usage_table;
pub(crate) mod usage_view;

use askama::Template;
use axum::response::{Html, IntoResponse};

use crate::error::PageResult;
use crate::layout::Layout;

/// Renders a template into an HTML response.
pub(crate) fn render(template: &impl Template) -> PageResult {
    Ok(Html(template.render()?).into_response())
}

/// A confirmation step before a destructive action (works without JavaScript).
#[derive(Template)]
#[template(path = "confirm.html")]
pub(crate) struct ConfirmPage {
    pub layout: Layout,
    pub heading: String,
    pub message: String,
    /// Where the confirming form posts.
    pub action: String,
    pub button: &'static str,
    pub cancel: &'static str,
}

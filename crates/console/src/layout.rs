//! [`Layout`]: what the page frame (`base.html`) needs: title, navigation, CSRF token, flashes.

use crate::session::{Flash, FlashKind};

/// The signed-in user as the navigation shows them.
#[derive(Debug, Clone)]
pub(crate) struct NavUser {
    pub name: String,
    pub is_admin: bool,
}

/// A flash message ready to render.
#[derive(Debug, Clone)]
pub(crate) struct FlashView {
    /// CSS class.
    pub class: &'static str,
    /// ARIA role: `alert` for errors (announced at once), `status` otherwise.
    pub role: &'static str,
    pub message: String,
}

impl From<Flash> for FlashView {
    fn from(flash: Flash) -> Self {
        let (class, role) = match flash.kind {
            FlashKind::Success => ("flash flash-success", "status"),
            FlashKind::Error => ("flash flash-error", "alert"),
        };
        Self {
            class,
            role,
            message: flash.message,
        }
    }
}

/// The page frame.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub title: String,
    pub user: Option<NavUser>,
    /// The session's CSRF token (empty when signed out).
    pub csrf: String,
    pub flashes: Vec<FlashView>,
    /// Which navigation entry is current (`"keys"`, `"usage"`, `"accounts"`, ...).
    pub active: &'static str,
}

impl Layout {
    /// A frame without navigation (sign-in and error pages).
    pub fn bare(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            user: None,
            csrf: String::new(),
            flashes: Vec::new(),
            active: "",
        }
    }

    /// `aria-current` value for a navigation entry.
    pub fn current(&self, entry: &str) -> &'static str {
        if self.active == entry { "page" } else { "false" }
    }
}

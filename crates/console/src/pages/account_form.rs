//! The account form (add and edit): parsing what was posted, and the view that renders it.

use imagegate_store::{Account, AccountKind, AccountTier, Group, GroupId, Secret};
use serde::Deserialize;

use crate::form::non_blank;
use crate::pages::usage_table::SelectOption;

/// Largest concurrency accepted per size class.
const MAX_CONCURRENCY: u32 = 256;

/// The posted account form (all text; blank = default or unchanged). No `Debug`: it holds the
/// upstream credential.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct AccountForm {
    name: String,
    kind: String,
    base_url: String,
    tier: String,
    priority: String,
    concurrency_standard: String,
    concurrency_large: String,
    groups: Vec<String>,
    main_model: String,
    fallback_models: String,
    credential: String,
    clear_credential: String,
}

/// A valid account form.
#[derive(Debug)]
pub(crate) struct ParsedAccount {
    pub name: String,
    /// Only on create (the kind of an account cannot change).
    pub kind: AccountKind,
    pub base_url: Option<String>,
    pub tier: AccountTier,
    pub priority: i32,
    pub concurrency_standard: u32,
    pub concurrency_large: u32,
    pub groups: Vec<GroupId>,
    pub main_model: Option<String>,
    pub fallback_models: Vec<String>,
    /// A new credential (never shown again).
    pub credential: Option<Secret>,
    /// Remove the stored credential.
    pub clear_credential: bool,
}

fn concurrency(text: &str, default: u32, what: &str) -> Result<u32, String> {
    match non_blank(text) {
        None => Ok(default),
        Some(text) => match text.parse::<u32>() {
            Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
            _ => Err(format!(
                "{what} concurrency must be a whole number from 1 to {MAX_CONCURRENCY}."
            )),
        },
    }
}

impl AccountForm {
    /// Checks the form; the error is a sentence for a flash message.
    pub fn parse(self) -> Result<ParsedAccount, String> {
        let name = non_blank(&self.name).ok_or("Give the account a name.")?;
        let kind = match non_blank(&self.kind) {
            None => AccountKind::Openai,
            Some(kind) => kind
                .parse()
                .map_err(|_| format!("Unknown account kind “{kind}”."))?,
        };
        let tier = match non_blank(&self.tier) {
            None => AccountTier::Free,
            Some(tier) => tier.parse().map_err(|_| format!("Unknown tier “{tier}”."))?,
        };
        let priority = match non_blank(&self.priority) {
            None => 0,
            Some(p) => p
                .parse()
                .map_err(|_| "Priority must be a whole number.".to_owned())?,
        };
        let base_url = non_blank(&self.base_url);
        if let Some(url) = &base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err("The base URL must start with http:// or https://.".to_owned());
        }
        let groups = self
            .groups
            .iter()
            .map(|g| g.trim().parse::<i64>().map(GroupId))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| "Unknown group in the form.".to_owned())?;
        Ok(ParsedAccount {
            name,
            kind,
            base_url,
            tier,
            priority,
            concurrency_standard: concurrency(&self.concurrency_standard, 4, "Standard")?,
            concurrency_large: concurrency(&self.concurrency_large, 1, "Large")?,
            groups,
            main_model: non_blank(&self.main_model),
            fallback_models: self.fallback_models.split(',').filter_map(non_blank).collect(),
            credential: non_blank(&self.credential).map(Secret::new),
            clear_credential: !self.clear_credential.is_empty(),
        })
    }
}

/// A group checkbox.
#[derive(Debug)]
pub(crate) struct GroupCheck {
    pub id: i64,
    pub name: String,
    pub checked: bool,
}

/// The form as rendered: an empty one to add, or one filled from an account to edit. The
/// credential is never filled in.
#[derive(Debug)]
pub(crate) struct AccountFormView {
    pub action: String,
    pub submit: &'static str,
    pub name: String,
    /// Choices of kind when adding; `None` when editing (shown as text).
    pub kinds: Option<Vec<SelectOption>>,
    pub kind: String,
    pub base_url: String,
    pub tiers: Vec<SelectOption>,
    pub priority: String,
    pub concurrency_standard: String,
    pub concurrency_large: String,
    pub groups: Vec<GroupCheck>,
    pub main_model: String,
    pub fallback_models: String,
    pub has_credential: bool,
}

fn options<T: Copy + PartialEq>(all: &[T], chosen: T, text: fn(T) -> &'static str) -> Vec<SelectOption> {
    all.iter()
        .map(|v| SelectOption {
            value: text(*v).to_owned(),
            label: text(*v).to_owned(),
            selected: *v == chosen,
        })
        .collect()
}

impl AccountFormView {
    /// The empty form for a new account (in the default group).
    pub fn new_account(groups: &[Group]) -> Self {
        Self {
            action: "/admin/accounts".to_owned(),
            submit: "Add account",
            name: String::new(),
            kinds: Some(options(
                AccountKind::ALL,
                AccountKind::Openai,
                AccountKind::as_str,
            )),
            kind: String::new(),
            base_url: String::new(),
            tiers: options(AccountTier::ALL, AccountTier::Free, AccountTier::as_str),
            priority: "0".to_owned(),
            concurrency_standard: "4".to_owned(),
            concurrency_large: "1".to_owned(),
            groups: groups
                .iter()
                .map(|g| GroupCheck {
                    id: g.id.0,
                    name: g.name.clone(),
                    checked: g.name == imagegate_store::DEFAULT_GROUP,
                })
                .collect(),
            main_model: String::new(),
            fallback_models: String::new(),
            has_credential: false,
        }
    }

    /// The form filled from `account`.
    pub fn edit(account: &Account, groups: &[Group]) -> Self {
        Self {
            action: format!("/admin/accounts/{}", account.id),
            submit: "Save changes",
            name: account.name.clone(),
            kinds: None,
            kind: account.kind.as_str().to_owned(),
            base_url: account.base_url.clone().unwrap_or_default(),
            tiers: options(AccountTier::ALL, account.tier, AccountTier::as_str),
            priority: account.priority.to_string(),
            concurrency_standard: account.concurrency_standard.to_string(),
            concurrency_large: account.concurrency_large.to_string(),
            groups: groups
                .iter()
                .map(|g| GroupCheck {
                    id: g.id.0,
                    name: g.name.clone(),
                    checked: account.groups.contains(&g.id),
                })
                .collect(),
            main_model: account.main_model.clone().unwrap_or_default(),
            fallback_models: account.fallback_models.join(", "),
            has_credential: account.has_credential,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> AccountForm {
        let body: String = serde_html_form::to_string(pairs).unwrap();
        serde_html_form::from_str(&body).unwrap()
    }

    #[test]
    fn parses_a_full_form_with_several_groups() {
        let parsed = form(&[
            ("name", "pro-1"),
            ("kind", "codex"),
            ("tier", "pro"),
            ("priority", "-2"),
            ("concurrency_standard", "8"),
            ("concurrency_large", ""),
            ("groups", "1"),
            ("groups", "3"),
            ("fallback_models", "gpt-5, gpt-4.1 ,"),
            ("credential", "  sk-secret  "),
        ])
        .parse()
        .unwrap();
        assert_eq!(parsed.kind, AccountKind::Codex);
        assert_eq!(parsed.tier, AccountTier::Pro);
        assert_eq!(parsed.priority, -2);
        assert_eq!((parsed.concurrency_standard, parsed.concurrency_large), (8, 1));
        assert_eq!(parsed.groups, vec![GroupId(1), GroupId(3)]);
        assert_eq!(parsed.fallback_models, vec!["gpt-5", "gpt-4.1"]);
        assert_eq!(parsed.credential.unwrap().expose(), "sk-secret");
        assert!(!parsed.clear_credential);
    }

    #[test]
    fn explains_what_is_wrong() {
        assert_eq!(
            form(&[("name", " ")]).parse().unwrap_err(),
            "Give the account a name."
        );
        assert!(
            form(&[("name", "a"), ("tier", "gold")])
                .parse()
                .unwrap_err()
                .contains("gold")
        );
        assert!(
            form(&[("name", "a"), ("concurrency_large", "0")])
                .parse()
                .unwrap_err()
                .contains("Large")
        );
        assert!(
            form(&[("name", "a"), ("base_url", "ftp://x")])
                .parse()
                .unwrap_err()
                .contains("http")
        );
    }
}

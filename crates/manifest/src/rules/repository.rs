//! `repository` rules: clone URL, raw base URL, branch, name.

use super::text::{git_ref_problem, parse_url};
use super::{Field, Obj, Rule, lists::blank};
use crate::finding::{Sink, quote};

pub(crate) fn check(top: Obj<'_, '_>, sink: &mut Sink) {
    let Some(repo) = top.node.get("repository") else {
        return;
    };
    let ptr = "/repository";
    let Some(repo) = Obj::new(repo, ptr) else { return };
    let name = repo.str("name");
    if let Some(name) = &name {
        blank(name, sink);
    }
    if let Some(git_url) = repo.str("git_url") {
        let repo_part = git_url_repo(&git_url, sink);
        if let (Some(repo_part), Some(name)) = (repo_part, &name)
            && !repo_part.eq_ignore_ascii_case(name.text)
            && !name.text.trim().is_empty()
        {
            sink.add(
                Rule::RepoName,
                &name.ptr(),
                name.span(),
                format!(
                    "repository.name {} differs from the repository in git_url",
                    quote(name.text)
                ),
            )
            .expected(quote(repo_part))
            .found(quote(name.text));
        }
    }
    let raw_path = repo.str("raw_base_url").and_then(|raw| raw_base_url(&raw, sink));
    if let Some(branch) = repo.str("branch") {
        if let Some(why) = git_ref_problem(branch.text) {
            sink.add(
                Rule::RepoBranch,
                &branch.ptr(),
                branch.span(),
                format!("branch is not a valid git ref name: {why}"),
            )
            .expected("a valid git branch name such as main")
            .found(quote(branch.text));
        } else if let Some(path) = raw_path {
            let path = format!("{}/", path.trim_end_matches('/'));
            if !path.contains(&format!("/{}/", branch.text)) {
                sink.add(
                    Rule::RepoBranchUrl,
                    &branch.ptr(),
                    branch.span(),
                    format!(
                        "branch {} is not a path segment of raw_base_url",
                        quote(branch.text)
                    ),
                )
                .expected(format!("raw_base_url with the segment /{}", branch.text))
                .found(path.trim_end_matches('/').to_owned());
            }
        }
    }
}

/// Check `git_url`; return the repository part (last path segment without `.git`) when it is usable.
fn git_url_repo<'a>(field: &Field<'a, '_>, sink: &mut Sink) -> Option<&'a str> {
    let text = field.text;
    let path = if let Some(path) = scp_like_path(text) {
        path
    } else {
        match parse_url(text) {
            Ok(url) if matches!(url.scheme.as_str(), "https" | "ssh" | "http" | "git+ssh") => {
                if url.scheme == "http" {
                    sink.add(
                        Rule::RepoGitUrlHttp,
                        &field.ptr(),
                        field.span(),
                        "git_url uses plain http",
                    )
                    .expected("https://...")
                    .found(quote(text));
                }
                url.path
            }
            Ok(url) => {
                sink.add(
                    Rule::RepoGitUrl,
                    &field.ptr(),
                    field.span(),
                    format!("git_url has the scheme `{}`", url.scheme),
                )
                .expected("https://host/owner/repo.git, ssh://... or git@host:owner/repo.git")
                .found(quote(text));
                return None;
            }
            Err(why) => {
                sink.add(
                    Rule::RepoGitUrl,
                    &field.ptr(),
                    field.span(),
                    format!("git_url is not a clone URL: {why}"),
                )
                .expected("https://host/owner/repo.git, ssh://... or git@host:owner/repo.git")
                .found(quote(text));
                return None;
            }
        }
    };
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let repo = last.strip_suffix(".git").unwrap_or(last);
    (!repo.is_empty()).then_some(repo)
}

/// The path of a `user@host:path` URL (the scp-like syntax git accepts for ssh).
fn scp_like_path(text: &str) -> Option<&str> {
    if text.contains("://") {
        return None;
    }
    let (user_host, path) = text.split_once(':')?;
    let (user, host) = user_host.split_once('@')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    (ok(user) && ok(host) && !path.is_empty() && !path.chars().any(char::is_whitespace)).then_some(path)
}

/// Check `raw_base_url`; return its path when it is usable.
fn raw_base_url<'a>(field: &Field<'a, '_>, sink: &mut Sink) -> Option<&'a str> {
    let problem = match parse_url(field.text) {
        Err(why) => Some(why.to_owned()),
        Ok(url) if url.scheme != "https" => Some(format!("its scheme is `{}`, not https", url.scheme)),
        Ok(url) if url.has_userinfo => Some("it contains user info (`user@`)".to_owned()),
        Ok(url) if url.has_query => Some("it has a query (`?...`)".to_owned()),
        Ok(url) if url.has_fragment => Some("it has a fragment (`#...`)".to_owned()),
        Ok(url) => return Some(url.path),
    };
    if let Some(why) = problem {
        sink.add(
            Rule::RepoRawBaseUrl,
            &field.ptr(),
            field.span(),
            format!("raw_base_url is not usable: {why}"),
        )
        .expected("an absolute https URL without query, fragment or user info")
        .found(quote(field.text));
    }
    None
}
